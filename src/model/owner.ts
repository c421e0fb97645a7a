// The owner id a configuration gets when it declares none (DESIGN.md "Ownership"), the same for a
// YAML/CDKTF configuration (cli/) and a Terraform configuration (provider/): derived from where it
// lives in version control, so every checkout and CI workspace path gets the same id:
// `<git remote, without scheme, credentials or .git>:<folder relative to the repository root>`,
// e.g. `github.com/acme/platform:kms`; outside git, `local:<folder name>`.
import { execFile } from 'node:child_process';
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { writeFileSafely } from './safe-files.js';

function git(cwd: string, args: string[]): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile('git', ['-C', cwd, ...args], { timeout: 5000 }, (error, stdout) =>
      resolve(error ? undefined : stdout.trim() || undefined),
    );
  });
}

/** `https://user:token@github.com/acme/platform.git` and `git@github.com:acme/platform.git` → `github.com/acme/platform`. */
export function normalizeRemote(url: string): string {
  let u = url.trim();
  const scp = /^[^@/]+@([^:/]+):(.+)$/.exec(u); // git@host:path
  if (scp) u = `${scp[1]}/${scp[2]}`;
  else u = u.replace(/^[a-z][a-z0-9+.-]*:\/\//i, '').replace(/^[^@/]*@/, '');
  return u.replace(/\.git$/, '').replace(/\/+$/, '');
}

export async function deriveOwner(dir: string): Promise<string> {
  const top = await git(dir, ['rev-parse', '--show-toplevel']);
  if (!top) return `local:${path.basename(dir)}`;
  const remote = await git(dir, ['remote', 'get-url', 'origin']);
  const rel = path.relative(top, dir).split(path.sep).join('/') || '.';
  return `${remote ? normalizeRemote(remote) : `local:${path.basename(top)}`}:${rel}`;
}

/**
 * The owner id a configuration applied under, recorded beside it (`.kms-sync/owner`) by the first
 * run that wrote to the service. A derived id can move (a plain folder becomes a git checkout,
 * gains or changes a remote, is copied under another name): the record is how a later run notices
 * that the resources it would manage carry the previous id, and stops instead of planning them as
 * another configuration's ("No changes").
 */
export const OWNER_RECORD = path.join('.kms-sync', 'owner');

export async function readOwnerRecord(baseDir: string): Promise<string | undefined> {
  try {
    const text = (await readFile(path.join(baseDir, OWNER_RECORD), 'utf8')).trim();
    return text && !/[\u0000-\u001f\u007f]/.test(text) ? text : undefined;
  } catch {
    return undefined;
  }
}

/** Records the owner id a run wrote under (atomically; unchanged when it is already recorded). */
export async function writeOwnerRecord(baseDir: string, owner: string): Promise<void> {
  if ((await readOwnerRecord(baseDir)) === owner) return;
  const file = path.join(baseDir, OWNER_RECORD);
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  // A full disk fails it naming the file and leaves no empty temp file.
  writeFileSafely(file, `${owner}\n`, 0o644);
}

/** The derived id moved since the configuration last applied: what to tell the user. */
export class OwnerMovedError extends Error {
  readonly recorded: string;
  readonly derived: string;
  constructor(recorded: string, derived: string) {
    super(
      `the owner id of this configuration moved: it applied as '${recorded}' (recorded in ${OWNER_RECORD}) and is now derived as '${derived}' ` +
        '(the folder became a git checkout, its remote changed, or it was copied). What it created carries the old id, so planning under the new one ' +
        `would leave all of it alone. Declare the id in the configuration to keep managing it: owner: ${JSON.stringify(recorded)} ` +
        `(a Terraform provider block: owner = ${JSON.stringify(recorded)}); or, if this is a new configuration, declare owner: ${JSON.stringify(derived)} ` +
        '(or another) and claim what it names with --take-ownership (see docs/troubleshooting.md#owner-id-moved)',
    );
    this.recorded = recorded;
    this.derived = derived;
  }
}

/**
 * The owner id: declared, else derived — and a derived id that differs from the one recorded by
 * an earlier run is refused (OwnerMovedError). One rule for the CLI and the provider.
 */
export async function resolveOwnerId(
  declared: string | undefined,
  baseDir: string,
): Promise<{ owner: string; derived: boolean }> {
  if (declared) return { owner: declared, derived: false };
  const derived = await deriveOwner(baseDir);
  const recorded = await readOwnerRecord(baseDir);
  if (recorded !== undefined && recorded !== derived) throw new OwnerMovedError(recorded, derived);
  return { owner: derived, derived: true };
}
