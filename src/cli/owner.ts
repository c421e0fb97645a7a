// The owner id of a configuration (DESIGN.md "Ownership"): declared with `owner:` in YAML (or the
// CDKTF provider's `owner`), else derived from where the configuration lives in version control,
// so that the same configuration gets the same id in every checkout and CI workspace path:
// `<git remote, without scheme, credentials or .git>:<folder relative to the repository root>`,
// e.g. `github.com/acme/platform:kms`. Outside git, `local:<folder name>`.
import { execFile } from 'node:child_process';
import path from 'node:path';
import type { DesiredState } from '../model/index.js';

function git(cwd: string, args: string[]): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile('git', ['-C', cwd, ...args], { timeout: 5000 }, (error, stdout) => resolve(error ? undefined : stdout.trim() || undefined));
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

export async function resolveOwner(desired: DesiredState, baseDir: string): Promise<{ owner: string; derived: boolean }> {
  if (desired.owner) return { owner: desired.owner, derived: false };
  const top = await git(baseDir, ['rev-parse', '--show-toplevel']);
  if (top) {
    const remote = await git(baseDir, ['remote', 'get-url', 'origin']);
    const rel = path.relative(top, baseDir).split(path.sep).join('/') || '.';
    return { owner: `${remote ? normalizeRemote(remote) : `local:${path.basename(top)}`}:${rel}`, derived: true };
  }
  return { owner: `local:${path.basename(baseDir)}`, derived: true };
}
