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

/** Where the opt-in can come from, for messages. */
export const OPT_IN_HINT = `--allow-local-store (apply, rotate), ${ALLOW_LOCAL_STORE_ENV}=1, or \`settings: { allowLocalStoreInCi: true }\` in the configuration`;

/**
 * The refusal, for every front end: what is refused, why, and the two ways out (a remote store, or
 * a workflow step that commits and pushes the file, with the opt-in). `files` are display paths.
 */
export function localStoreRefusal(files: readonly { file: string; keys: number }[], env: NodeJS.ProcessEnv): string {
  const keys = files.reduce((n, f) => n + f.keys, 0);
  const where = files.length === 1 ? files[0]!.file : files.map((f) => `${f.file} (${f.keys} key(s))`).join(', ');
  return (
    `refusing to issue ${keys} new key(s) into the local store file${files.length === 1 ? '' : 's'} ${where} on this CI runner (CI=${env.CI ?? ''}): ` +
    'the runner is discarded when the job ends and the new raw keys with it (the service returns a raw key once), ' +
    'whether or not git tracks the file. Nothing was issued. Two ways out:\n' +
    '  1. declare a remote secret store under stores: (vault://, aws-sm://, gcp-sm://, azure-kv://, github://, gitlab://, kubernetes://) ' +
    "with default: true, or name it in the keys' secret.store;\n" +
    '  2. or keep the file and add a workflow step after apply that commits and pushes it (examples/ci/github, examples/ci/gitlab), ' +
    `then opt in with ${OPT_IN_HINT}.\nSee docs/troubleshooting.md#local-store-refused-in-ci.`
  );
}

/** The last lines of an opted-in CI run that wrote keys into local files (or left its journal). */
export function commitReminder(files: readonly { file: string; keys: number }[], journal?: string): string[] {
  const lines: string[] = [];
  for (const f of files) {
    lines.push(
      `kms-sync wrote ${f.keys} new key(s) into ${f.file} on this CI runner: commit and push it, nothing else keeps them; the runner is discarded when the job ends.`,
    );
  }
  if (journal) {
    lines.push(
      `kms-sync left its key journal ${journal} on this CI runner (keys not yet in their store; age-encrypted): commit and push it too, the next run stores them; otherwise they are lost with the runner.`,
    );
  }
  return lines;
}
