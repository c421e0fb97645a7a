// Node's compile cache for the CLI's own code: V8 keeps the bytecode of the modules it compiled,
// and the next run reads it instead of parsing and compiling them again (~35 ms of a `validate`
// or a `plan`; TypeScript's tsc does the same). The cache sits in the user's cache folder, not in
// the shared temporary folder Node uses by default: bytecode read from a folder that another user
// could write would run as ours. NODE_COMPILE_CACHE (another folder) and
// NODE_DISABLE_COMPILE_CACHE=1 (none) are Node's own switches and win. A cache that cannot be
// written costs nothing but the speed-up. The folder is made here, one level at a time: Node's
// recursive mkdir (which enableCompileCache uses) never returns where mkdir answers ENOENT under a
// folder that exists, as under /proc (HOME=/proc spun a CPU until killed).
import { existsSync, mkdirSync } from 'node:fs';
import module from 'node:module';
import os from 'node:os';
import path from 'node:path';

/** Where the cache goes: $NODE_COMPILE_CACHE, else the platform's per-user cache folder. */
export function compileCacheDir(env: NodeJS.ProcessEnv = process.env, platform: NodeJS.Platform = process.platform, home = os.homedir()): string | undefined {
  if (env.NODE_COMPILE_CACHE) return env.NODE_COMPILE_CACHE;
  const base = env.XDG_CACHE_HOME
    || (platform === 'win32' ? env.LOCALAPPDATA : platform === 'darwin' ? home && path.join(home, 'Library', 'Caches') : home && path.join(home, '.cache'));
  return base ? path.join(base, 'kms-sync', 'node-compile-cache') : undefined;
}

/** Makes `dir` and its missing parents with plain mkdir calls; false when one fails. */
function madeFolder(dir: string): boolean {
  const missing: string[] = [];
  for (let d = path.resolve(dir); !existsSync(d); d = path.dirname(d)) {
    if (path.dirname(d) === d) return false;
    missing.unshift(d);
  }
  try {
    for (const d of missing) mkdirSync(d);
    return true;
  } catch {
    return false;
  }
}

export function enableCliCompileCache(env: NodeJS.ProcessEnv = process.env): void {
  if (env.NODE_DISABLE_COMPILE_CACHE) return;
  const dir = compileCacheDir(env);
  if (dir === undefined || !madeFolder(dir)) return;
  try {
    module.enableCompileCache(dir);
  } catch {
    // An optimisation only.
  }
}
