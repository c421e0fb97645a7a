// The behaviour every cloud backend must show, written black-box against the SecretStore interface,
// so the same assertions run unchanged against the local wire fakes and (opt-in) a real account.
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretStoreError, targetMatches, type SecretStore } from '../../../src/secrets/store.js';
import { expectNoSecrets, fakeKey, meta } from '../helpers.js';

export interface ContractTarget {
  store: SecretStore;
  /** Backend-legal name pattern. */
  legal: RegExp;
  /** Removes what the run wrote (real accounts); backend names. */
  cleanup?(names: string[]): Promise<void>;
}

export function storeContract(label: string, open: () => Promise<ContractTarget>): void {
  describe(`${label}: SecretStore contract`, () => {
    let t: ContractTarget;
    const run = `t${randomBytes(4).toString('hex')}`;
    const written = new Set<string>();
    const logical = (client: string, key = 'primary'): string => `${run}-env/${client}/${key}`;

    beforeAll(async () => {
      t = await open();
    });
    afterAll(async () => {
      if (t?.cleanup && written.size) await t.cleanup([...written]);
    });

    it('checkWritable resolves for a reachable, writable store', async () => {
      await expect(t.store.checkWritable()).resolves.toBeUndefined();
    });

    it('maps logical names deterministically to legal names', () => {
      const a = t.store.secretName(logical('web'));
      expect(a).toMatch(t.legal);
      expect(t.store.secretName(logical('web'))).toBe(a);
      expect(t.store.secretName(logical('Web'))).not.toBe(a);
      expect(() => t.store.secretName('no-slashes')).toThrow(SecretStoreError);
    });

    it('put, then exists / read / list see the value and its metadata', async () => {
      const name = t.store.secretName(logical('web'));
      const value = fakeKey();
      const m = meta(logical('web'));
      expect(await t.store.exists(name)).toBe(false);
      await t.store.put(name, value, m);
      written.add(name);
      expect(await t.store.exists(name)).toBe(true);
      expect(await t.store.read!(name)).toBe(value);
      const listed = (await t.store.list!()).find((l) => l.name === name);
      expect(listed?.meta?.keyId).toBe(m.keyId);
      expect(listed?.meta?.client).toBe('web');
      expect(listed?.updatedAt).toMatch(/^\d{4}-\d\d-\d\dT/);
    });

    it('a retried put is harmless and a rotation replaces value and key id', async () => {
      const name = t.store.secretName(logical('api'));
      const v1 = fakeKey();
      const m1 = meta(logical('api'));
      await t.store.put(name, v1, m1);
      written.add(name);
      await t.store.put(name, v1, m1); // the journal re-flushing an entry that already landed
      expect(await t.store.read!(name)).toBe(v1);
      const v2 = fakeKey();
      const m2 = meta(logical('api'));
      await t.store.put(name, v2, m2);
      expect(await t.store.read!(name)).toBe(v2);
      expect((await t.store.list!()).find((l) => l.name === name)?.meta?.keyId).toBe(m2.keyId);
    });

    it('putMany stores a batch; existsMany answers exactly the present names', async () => {
      const names = ['b1', 'b2', 'b3'].map((c) => t.store.secretName(logical(c)));
      const values = names.map(() => fakeKey());
      await t.store.putMany(names.map((name, i) => ({ name, value: values[i]!, meta: meta(logical(`b${i + 1}`)) })));
      for (const n of names) written.add(n);
      const absent = t.store.secretName(logical('never-written'));
      const present = await t.store.existsMany([...names, absent]);
      expect([...present].sort()).toEqual([...names].sort());
      expect(await t.store.existsMany([])).toEqual(new Set());
      expect(await t.store.read!(names[1]!)).toBe(values[1]);
      expect(await t.store.read!(absent)).toBeUndefined();
    });

    it('records the service target: list returns it; an entry without one (written before targets) lists without; a rewrite replaces or clears it', async () => {
      const live = 'https://kms.example.com/api/v1#live';
      const odd = 'Prod EU (blue) #2 – ü=1?&';
      const long = `https://kms.example.com/${'a'.repeat(600)}#live`;
      const tgt = t.store.secretName(logical('tgt'));
      const legacy = t.store.secretName(logical('legacy'));
      const big = t.store.secretName(logical('big'));
      await t.store.put(tgt, fakeKey(), meta(logical('tgt'), { target: live }));
      written.add(tgt);
      await t.store.put(legacy, fakeKey(), meta(logical('legacy')));
      written.add(legacy);
      await t.store.put(big, fakeKey(), meta(logical('big'), { target: long }));
      written.add(big);
      const find = async (n: string) => (await t.store.list!()).find((l) => l.name === n);
      expect((await find(tgt))?.meta?.target).toBe(live);
      const old = await find(legacy);
      expect(old?.meta?.keyId).toBeDefined();
      expect(old?.meta).not.toHaveProperty('target');
      // Too long for the backend's metadata: its targetTag, which targetMatches compares.
      const bigTarget = (await find(big))?.meta?.target;
      expect(targetMatches(bigTarget, long)).toBe(true);
      expect(targetMatches(bigTarget, live)).toBe(false);

      await t.store.put(tgt, fakeKey(), meta(logical('tgt'), { target: odd }));
      expect((await find(tgt))?.meta?.target).toBe(odd);
      const m = meta(logical('tgt'));
      await t.store.put(tgt, fakeKey(), m);
      const cleared = await find(tgt);
      expect(cleared?.meta?.keyId).toBe(m.keyId);
      expect(cleared?.meta).not.toHaveProperty('target');
    });

    it('refuses a target that is not a non-empty string', async () => {
      const name = t.store.secretName(logical('badtarget'));
      for (const target of [7, ''] as unknown as string[]) {
        await expect(t.store.put(name, fakeKey(), meta(logical('badtarget'), { target }))).rejects.toThrow(/'target'/);
      }
      expect(await t.store.exists(name)).toBe(false);
    });

    it('errors carry names, never values', async () => {
      const value = fakeKey();
      let msg = '';
      try {
        await t.store.put('not a legal name!', value, meta(logical('x')));
      } catch (e) {
        msg = (e as Error).message;
        expect(e).toBeInstanceOf(SecretStoreError);
      }
      expect(msg).not.toBe('');
      expectNoSecrets(msg, [value]);
    });
  });
}
