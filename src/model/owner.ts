// The owner id a configuration gets when it declares none (DESIGN.md "Ownership"), the same for a
// YAML/CDKTF configuration (cli/) and a Terraform configuration (provider/): derived from where it
// lives in version control, so every checkout and CI workspace path gets the same id:
// `<git remote, without scheme, credentials or .git>:<folder relative to the repository root>`,
// e.g. `github.com/acme/platform:kms`; outside git, `local:<folder name>`.
import { execFile } from 'node:child_process';
import path from 'node:path';

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

export async function deriveOwner(dir: string): Promise<string> {
  const top = await git(dir, ['rev-parse', '--show-toplevel']);
  if (!top) return `local:${path.basename(dir)}`;
  const remote = await git(dir, ['remote', 'get-url', 'origin']);
  const rel = path.relative(top, dir).split(path.sep).join('/') || '.';
  return `${remote ? normalizeRemote(remote) : `local:${path.basename(top)}`}:${rel}`;
}
