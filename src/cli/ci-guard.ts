// In CI an ephemeral runner would take a local store file, and the keys in it, with it when the job
// ends. Refuse to issue keys into a local file that git does not track, unless the user opts in.
import { execFile } from 'node:child_process';
import path from 'node:path';
import type { Plan } from '../plan/types.js';
import { opStores } from '../apply/execute.js';
import type { StoreRegistry } from '../secrets/registry.js';
import { UsageError } from './errors.js';
import { isCi } from './output.js';

function gitTracks(file: string): Promise<boolean> {
  return new Promise((resolve) => {
    execFile('git', ['-C', path.dirname(file), 'ls-files', '--error-unmatch', path.basename(file)], (error) => resolve(!error));
  });
}

export async function guardLocalStoreInCi(plan: Plan, registry: StoreRegistry, opts: { allow: boolean; env: NodeJS.ProcessEnv }): Promise<void> {
  if (!isCi(opts.env) || opts.allow) return;
  const stores = new Set(plan.operations.filter((o) => (o.issuesKeys ?? 0) > 0 || o.action === 'rotate').flatMap(opStores));
  for (const name of stores) {
    const store = await registry.get(name);
    const file = (store as { path?: string }).path;
    if (store.kind !== 'sops-file' || !file) continue;
    if (await gitTracks(file)) continue;
    throw new UsageError(
      `refusing to issue keys into the local store ${store.displayUri} in CI (CI=${opts.env.CI}): the file is not committed to git, so this ephemeral runner would take the keys with it.\n` +
        'Either commit the store file (it is age-encrypted, SOPS format), declare a real secret store under stores:, ' +
        'or opt in with --allow-local-store (or KMS_SYNC_ALLOW_LOCAL_STORE=1) if this runner keeps its files.',
    );
  }
}
