// How the default secret store (SOPS file) scales with the number of secrets it holds: the cost of
// one batched write (putMany) and of the plan's secret check (existsMany on a fresh instance, as a
// new `kms-sync plan` process does). Not part of `npm run bench`: a probe for the secrets layer.
//
//   node bench/store-scale.js [batch sizes, default 1000,1000,2000,4000,8000]
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { AgeKeys, SopsFileStore } from '../dist/secrets/index.js';

const sizes = (process.argv[2] ?? '1000,1000,2000,4000,8000').split(',').map(Number);
const dir = mkdtempSync(path.join(tmpdir(), 'kms-sync-store-scale-'));
try {
  const env = { SOPS_AGE_KEY_FILE: path.join(dir, 'keys.txt'), HOME: dir };
  await new AgeKeys({ env }).recipients();
  const file = path.join(dir, 'secrets.sops.yaml');
  const store = new SopsFileStore(file, { env });
  let total = 0;
  for (const n of sizes) {
    const entries = Array.from({ length: n }, (_, i) => {
      const client = `client-${String(total + i).padStart(6, '0')}`;
      return {
        name: `bench-production/${client}/key-0`,
        value: `kmsc_${'x'.repeat(43)}`,
        meta: {
          projectEnv: 'bench-production',
          client,
          key: 'key-0',
          keyId: `id-${total + i}`,
          issuedAt: '2026-11-22T00:00:00.000Z',
          expiresAt: null,
        },
      };
    });
    let t = performance.now();
    await store.putMany(entries);
    const put = performance.now() - t;
    total += n;
    const names = Array.from(
      { length: Math.min(total, 1000) },
      (_, i) => `bench-production/client-${String(i).padStart(6, '0')}/key-0`,
    );
    t = performance.now();
    await new SopsFileStore(file, { env }).existsMany(names);
    const exists = performance.now() - t;
    process.stdout.write(
      `${String(total).padStart(7)} secrets: putMany(+${n}) ${Math.round(put)} ms, existsMany(${names.length}) on a fresh instance ${Math.round(exists)} ms\n`,
    );
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
