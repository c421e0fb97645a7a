// TargetGuard over the real file store: a write never replaces another service target's secret,
// stamps the run's target on what it writes, keeps a journaled entry's own target, and treats
// secrets written before targets were recorded as this target's.
import path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { SopsFileStore } from '../../src/secrets/index.js';
import { targetTag } from '../../src/secrets/store.js';
import { TargetGuard } from '../../src/secrets/target-guard.js';
import { fakeKey, meta, sandbox, type Sandbox } from './helpers.js';

let sb: Sandbox;
let file: string;
beforeEach(async () => {
  sb = await sandbox();
  file = path.join(sb.dir, 'secrets.sops.yaml');
});
afterEach(() => sb.cleanup());

const STAGING = 'https://staging.example/api#test';
const PRODUCTION = 'https://kms.example/api#live';

describe('TargetGuard', () => {
  it('refuses to replace a secret of another target, before writing anything of the batch', async () => {
    const staging = new TargetGuard(STAGING).wrap(new SopsFileStore(file, { env: sb.env }));
    const kept = fakeKey();
    await staging.putMany([
      { name: 'shop-production/web/primary', value: kept, meta: meta('shop-production/web/primary') },
    ]);
    const listed = await new SopsFileStore(file, { env: sb.env }).list();
    expect(listed[0]!.meta?.target).toBe(STAGING);

    const fresh = new SopsFileStore(file, { env: sb.env });
    const production = new TargetGuard(PRODUCTION).wrap(fresh);
    await expect(
      production.putMany([
        { name: 'shop-production/api/primary', value: fakeKey(), meta: meta('shop-production/api/primary') },
        { name: 'shop-production/web/primary', value: fakeKey(), meta: meta('shop-production/web/primary') },
      ]),
    ).rejects.toMatchObject({ code: 'CONFLICT' });
    expect(await fresh.read('shop-production/web/primary')).toBe(kept);
    expect(await fresh.exists('shop-production/api/primary')).toBe(false);
    expect(await new TargetGuard(PRODUCTION).conflicts(fresh, ['shop-production/web/primary', 'other/x/y'])).toEqual([
      { name: 'shop-production/web/primary', holder: STAGING },
    ]);
  });

  it('the same target may replace its own secret; a listed targetTag is the same target', async () => {
    const store = new SopsFileStore(file, { env: sb.env });
    const guard = new TargetGuard(STAGING);
    await store.put('a/b/c', fakeKey(), meta('a/b/c', { target: targetTag(STAGING) }));
    const next = fakeKey();
    await guard.wrap(store).put('a/b/c', next, meta('a/b/c'));
    expect(await store.read('a/b/c')).toBe(next);
  });

  it('a journaled entry keeps the target it was issued by; a legacy secret without one is replaced', async () => {
    const store = new SopsFileStore(file, { env: sb.env });
    await store.put('a/b/c', fakeKey(), meta('a/b/c'));
    // A flush run with no target of its own (kms-sync secrets flush) writes the entry's target.
    await new TargetGuard(undefined).wrap(store).put('a/b/c', fakeKey(), meta('a/b/c', { target: PRODUCTION }));
    expect((await store.list())[0]!.meta?.target).toBe(PRODUCTION);
    await expect(
      new TargetGuard(undefined)
        .wrap(new SopsFileStore(file, { env: sb.env }))
        .put('a/b/c', fakeKey(), meta('a/b/c', { target: STAGING })),
    ).rejects.toThrow(/another service/);
  });
});
