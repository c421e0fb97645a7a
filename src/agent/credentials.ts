// systemd credentials (LoadCredential= in the unit): systemd puts each secret in a private,
// in-memory folder only this service can read and names it in $CREDENTIALS_DIRECTORY. A credential
// named like an environment variable (KMS_API_KEY, KMS_SYNC_GITHUB_WEBHOOK_SECRET, …) becomes that
// variable, unless the environment already sets it, so the secrets need no environment file and
// never appear in `systemctl show`.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

const VARIABLE_NAME = /^[A-Z][A-Z0-9_]*$/;

/** Sets env[NAME] from $CREDENTIALS_DIRECTORY/NAME for each such credential; returns the names set. */
export function loadSystemdCredentials(env: NodeJS.ProcessEnv): string[] {
  const dir = env.CREDENTIALS_DIRECTORY;
  if (!dir) return [];
  const set: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (!entry.isFile() || !VARIABLE_NAME.test(entry.name) || env[entry.name] !== undefined) continue;
    // A trailing newline is the editor's, not the secret's.
    env[entry.name] = readFileSync(path.join(dir, entry.name), 'utf8').replace(/\r?\n$/, '');
    set.push(entry.name);
  }
  return set;
}
