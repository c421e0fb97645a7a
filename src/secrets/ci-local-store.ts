// In CI a local store file is a place keys go to die: the runner is thrown away when the job ends,
// and a workflow rarely commits and pushes what a job wrote. So, in CI, issuing keys into a local
// file store is refused before any key is issued unless the user opts in (DESIGN.md "Keys").
// One rule for every front end: `kms-sync apply`/`rotate` and the Terraform provider.
import type { SecretStore } from './store.js';

/** The variable that opts in, for front ends without a flag (Terraform, CDKTF). */
export const ALLOW_LOCAL_STORE_ENV = 'KMS_SYNC_ALLOW_LOCAL_STORE';

export function isCi(env: NodeJS.ProcessEnv): boolean {
  const v = (env.CI ?? '').toLowerCase();
  return v !== '' && v !== '0' && v !== 'false';
}

export function localStoreOptedIn(env: NodeJS.ProcessEnv): boolean {
  const v = (env[ALLOW_LOCAL_STORE_ENV] ?? '').toLowerCase();
  return v === '1' || v === 'true' || v === 'yes';
}

/** The path of a store that is a file on this machine, else undefined. */
export function localStoreFile(store: SecretStore): string | undefined {
  const file = (store as { path?: unknown }).path;
  return store.kind === 'sops-file' && typeof file === 'string' ? file : undefined;
}
