// The owner id of a Terraform configuration when the provider block names none, derived the way
// kms-sync derives a YAML configuration's (cli/owner.ts, which this layer may not import; a test
// keeps the two equal): `<git remote>:<folder in the repository>`, else `local:<folder>`.
import { execFile } from 'node:child_process';
import path from 'node:path';

function git(cwd: string, args: string[]): Promise<string | undefined> {
  return new Promise((resolve) => {
    execFile('git', ['-C', cwd, ...args], { timeout: 5000 }, (error, stdout) => resolve(error ? undefined : stdout.trim() || undefined));
  });
}

/** `https://user:token@github.com/acme/platform.git`, `git@github.com:acme/platform.git` → `github.com/acme/platform`. */
function normalizeRemote(url: string): string {
  let u = url.trim();
  const scp = /^[^@/]+@([^:/]+):(.+)$/.exec(u);
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
