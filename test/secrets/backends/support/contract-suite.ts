// The behaviour every remote backend must show, written once and run unchanged against the fake
// servers here and, when the environment names one, against a real server.
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { SecretStoreError, targetMatches, type SecretStore } from '../../../../src/secrets/store.js';
import { expectNoSecrets, fakeKey, meta } from '../../helpers.js';
import { skipWhen } from '../../../support/skip.js';

export interface ContractTarget {
  label: string;
  open(): Promise<SecretStore>;
  /** The backend returns values (`read`). */
  canRead: boolean;
  /** `list()` carries the key id (metadata). */
  listsMeta: boolean;
  /** A regular expression every backend name must match. */
  legalName: RegExp;
  /** Removes what the suite wrote (real servers; fakes are thrown away). */
  cleanup?(names: string[]): Promise<void>;
  /** Skip the whole suite (opt-in real servers). */
  skip?: boolean;
}

/** Values handed to the store in a suite: none may appear in any error. */
export function valueTracker(): { values: string[]; next(): string } {
  const values: string[] = [];
  return {
    values,
    next: () => {
      const v = fakeKey();
      values.push(v);
      return v;
    },
  };
}

export async function rejectionOf(p: Promise<unknown>, values: string[]): Promise<SecretStoreError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(SecretStoreError);
    const e = err as SecretStoreError;
    expectNoSecrets(`${e.message}\n${e.stack ?? ''}\n${String(e.cause ?? '')}`, values);
    expect(e.message).not.toMatch(/kmsc_[A-Za-z0-9_-]{8,}/);
    return e;
  }
  throw new Error('expected a rejection');
}

export function defineStoreContract(t: ContractTarget): void {
  describe.skipIf(skipWhen(!!t.skip, `${t.label}: store contract: its server or account is not configured`))(
    `${t.label}: store contract`,
    () => {
      const run = `kmst${randomBytes(3).toString('hex')}`;
      const written = new Set<string>();
      const keys = valueTracker();
      afterAll(async () => {
        if (t.cleanup && written.size) await t.cleanup([...written]);
      });

      it('checkWritable resolves with sufficient rights', async () => {
        const store = await t.open();
        await expect(store.checkWritable()).resolves.toBeUndefined();
      });

      it('maps logical names to legal, deterministic names', async () => {
        const store = await t.open();
        for (const logical of [`${run}-prod/web/primary`, `${run}-prod/Web_App/key.2`, `${run}/ünïcode/k`]) {
          const a = store.secretName(logical);
          expect(a).toMatch(t.legalName);
          expect(store.secretName(logical)).toBe(a);
        }
        expect(store.secretName(`${run}-a-b/c/k`)).not.toBe(store.secretName(`${run}-a/b-c/k`));
      });

      it('put, exists, existsMany, read and list agree; a second put replaces the value', async () => {
        const store = await t.open();
        const logical = `${run}-prod/web/primary`;
        const name = store.secretName(logical);
        const missing = store.secretName(`${run}-prod/web/absent`);
        written.add(name);
        expect(await store.exists(name)).toBe(false);
        const v1 = keys.next();
        const m1 = meta(logical, { expiresAt: '2031-01-01T00:00:00.000Z' });
        await store.put(name, v1, m1);
        expect(await store.exists(name)).toBe(true);
        expect([...(await store.existsMany([name, missing]))]).toEqual([name]);
        if (t.canRead) expect(await store.read!(name)).toBe(v1);
        else expect(store.read).toBeUndefined();
        const listed = (await store.list!()).find((l) => l.name === name);
        expect(listed).toBeDefined();
        if (t.listsMeta) {
          expect(listed!.meta?.keyId).toBe(m1.keyId);
          expect(listed!.meta?.expiresAt).toBe('2031-01-01T00:00:00.000Z');
        }

        const v2 = keys.next();
        const m2 = meta(logical);
        await store.put(name, v2, m2);
        if (t.canRead) expect(await store.read!(name)).toBe(v2);
        if (t.listsMeta) {
          const again = (await store.list!()).find((l) => l.name === name);
          expect(again!.meta?.keyId).toBe(m2.keyId);
          expect(again!.meta?.expiresAt ?? null).toBeNull();
        }
      });

      it('putMany stores every entry', async () => {
        const store = await t.open();
        const entries = ['api/primary', 'api/secondary', 'worker/primary'].map((s) => {
          const logical = `${run}-dev/${s}`;
          const name = store.secretName(logical);
          written.add(name);
          return { name, value: keys.next(), meta: meta(logical) };
        });
        await store.putMany(entries);
        const present = await store.existsMany(entries.map((e) => e.name));
        expect([...present].sort()).toEqual(entries.map((e) => e.name).sort());
        if (t.canRead) for (const e of entries) expect(await store.read!(e.name)).toBe(e.value);
        const names = new Set((await store.list!()).map((l) => l.name));
        for (const e of entries) expect(names.has(e.name)).toBe(true);
      });

      it('records the service target where the backend keeps metadata; an entry without one lists without; a rewrite replaces or clears it', async () => {
        const store = await t.open();
        const live = 'https://kms.example.com/api/v1#live';
        const odd = 'Prod EU (blue) #2 – ü=1?&';
        const long = `https://kms.example.com/${'a'.repeat(600)}#live`;
        const [tgt, legacy, big] = ['tgt', 'legacy', 'big'].map((c) => {
          const logical = `${run}-prod/${c}/primary`;
          const name = store.secretName(logical);
          written.add(name);
          return { logical, name };
        }) as [{ logical: string; name: string }, { logical: string; name: string }, { logical: string; name: string }];
        await store.put(tgt.name, keys.next(), meta(tgt.logical, { target: live }));
        await store.put(legacy.name, keys.next(), meta(legacy.logical));
        await store.put(big.name, keys.next(), meta(big.logical, { target: long }));
        const find = async (n: string) => (await store.list!()).find((l) => l.name === n);
        if (!t.listsMeta) {
          // No metadata at all (GitHub): every secret lists as unknown / legacy.
          for (const x of [tgt, legacy, big]) expect((await find(x.name))?.meta?.target).toBeUndefined();
          return;
        }
        expect((await find(tgt.name))?.meta?.target).toBe(live);
        const old = await find(legacy.name);
        expect(old?.meta?.keyId).toBeDefined();
        expect(old?.meta).not.toHaveProperty('target');
        // Too long for the backend's metadata: its targetTag, which targetMatches compares.
        const bigTarget = (await find(big.name))?.meta?.target;
        expect(targetMatches(bigTarget, long)).toBe(true);
        expect(targetMatches(bigTarget, live)).toBe(false);

        await store.put(tgt.name, keys.next(), meta(tgt.logical, { target: odd }));
        expect((await find(tgt.name))?.meta?.target).toBe(odd);
        const m = meta(tgt.logical);
        await store.put(tgt.name, keys.next(), m);
        const cleared = await find(tgt.name);
        expect(cleared?.meta?.keyId).toBe(m.keyId);
        expect(cleared?.meta).not.toHaveProperty('target');
      });

      it('refuses a target that is not a non-empty string', async () => {
        const store = await t.open();
        const logical = `${run}-prod/badtarget/primary`;
        const name = store.secretName(logical);
        for (const target of [7, ''] as unknown as string[]) {
          const e = await rejectionOf(store.put(name, keys.next(), meta(logical, { target })), keys.values);
          expect(e.code).toBe('INVALID_ARGUMENT');
          expect(e.message).toContain("'target'");
        }
        expect(await store.exists(name)).toBe(false);
      });

      it('refuses a name that is not backend-legal, without quoting the value', async () => {
        const store = await t.open();
        const v = keys.next();
        const e = await rejectionOf(store.put('not a legal/name!', v, meta('a/b/c')), keys.values);
        expect(e.code).toBe('INVALID_ARGUMENT');
      });
    },
  );
}
