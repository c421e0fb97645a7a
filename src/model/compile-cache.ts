// Node's compile cache for the CLI's and the provider's own code: V8 keeps the bytecode of the modules it compiled,
// and the next run reads it instead of parsing and compiling them again (~35 ms of a `validate`
// or a `plan`; TypeScript's tsc does the same). The cache sits in the user's cache folder, not in
// the shared temporary folder Node uses by default: bytecode read from a folder that another user
// could write would run as ours. NODE_COMPILE_CACHE (another folder) and
// NODE_DISABLE_COMPILE_CACHE=1 (none) are Node's own switches and win. A cache that cannot be
// written costs nothing but the speed-up. The folder is made here, one level at a time: Node's
// recursive mkdir (which enableCompileCache uses) never returns where mkdir answers ENOENT under a
// folder that exists, as under /proc (HOME=/proc spun a CPU until killed).
// Bytecode is code: the folders made here are 0700 whatever the umask, and a cache folder (or one of
// its entries, or a folder above it up to the cache base) that another user owns or may write is
// not used; one line on stderr says so (Node checks only an entry's length and CRC, so an entry
// planted there would run as us, with KMS_API_KEY in the environment).
import { chmodSync, existsSync, lstatSync, mkdirSync, readdirSync, statSync, type Stats } from 'node:fs';
import module from 'node:module';
import os from 'node:os';
import path from 'node:path';

/** Where the cache goes: $NODE_COMPILE_CACHE, else the platform's per-user cache folder. */
export function compileCacheDir(
  env: NodeJS.ProcessEnv = process.env,
  platform: NodeJS.Platform = process.platform,
  home = os.homedir(),
): string | undefined {
  if (env.NODE_COMPILE_CACHE) return env.NODE_COMPILE_CACHE;
  const base =
    env.XDG_CACHE_HOME ||
    (platform === 'win32'
      ? env.LOCALAPPDATA
      : platform === 'darwin'
        ? home && path.join(home, 'Library', 'Caches')
        : home && path.join(home, '.cache'));
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
    for (const d of missing) mkdirSync(d, { mode: 0o700 });
    return true;
  } catch {
    return false;
  }
}

const mode = (st: Stats) => `0${(st.mode & 0o777).toString(8)}`;

/**
 * Why `dir` must not hold our bytecode, or undefined when it may: it and its entries must be
 * directories or files we own that no one else may write; each folder above it, up to and with
 * `base`, must be owned by us or root and not writable by others unless sticky (as /tmp), so no
 * one else can swap it. Not checked where there are no uids (Windows).
 */
export function unsafeCacheReason(dir: string, base: string, uid = process.getuid?.()): string | undefined {
  if (uid === undefined) return undefined;
  const own = (p: string, st: Stats): string | undefined => {
    if (st.isSymbolicLink()) return `${p} is a symbolic link`;
    if (st.uid !== uid) return `${p} is owned by another user (uid ${st.uid})`;
    if (st.mode & 0o022) return `${p} is writable by other users (mode ${mode(st)})`;
    return undefined;
  };
  const top = lstatSync(dir);
  if (!top.isDirectory() && !top.isSymbolicLink()) return `${dir} is not a folder`;
  const bad = own(dir, top);
  if (bad) return bad;
  // Node makes its per-version folder with the umask's mode (0777 under umask 000). Inside a folder
  // only we can enter that is harmless (no one else can reach, let alone write, what is in it; the
  // per-version folders are tightened after enabling): its entries are not walked, which cost an
  // lstat per cached module on every start (~100 ms with 14,000 entries). Where others may enter
  // ours (an older 0755 one), an entry others may write may hold their bytecode.
  const closed = (top.mode & 0o077) === 0;
  if (closed) return unsafeParentReason(dir, path.dirname(path.resolve(base)), uid);
  const check = (entry: string): string | undefined => {
    const st = lstatSync(entry);
    if (st.isSymbolicLink()) return `${entry} is a symbolic link`;
    if (st.uid !== uid) return `${entry} is owned by another user (uid ${st.uid})`;
    if (st.mode & 0o022) return `${entry} is writable by other users (mode ${mode(st)})`;
    return undefined;
  };
  for (const name of readdirSync(dir)) {
    const entry = path.join(dir, name);
    const b = check(entry);
    if (b) return b;
    if (lstatSync(entry).isDirectory())
      for (const sub of readdirSync(entry)) {
        const r = check(path.join(entry, sub));
        if (r) return r;
      }
  }
  return unsafeParentReason(dir, path.dirname(path.resolve(base)), uid);
}

/**
 * Why the folders above `dir` (up to, not with, `stop`; default: up to the root) let someone else
 * replace it, or undefined: each must be owned by us or root and not writable by others unless
 * sticky (as /tmp). Followed through symbolic links (a ~/.cache linked elsewhere): what matters is
 * who may replace the folder it leads to; the link itself lives in the folder checked next.
 */
export function unsafeParentReason(dir: string, stop: string | undefined, uid: number): string | undefined {
  for (let d = path.dirname(path.resolve(dir)); d !== stop; d = path.dirname(d)) {
    const st = statSync(d);
    if (st.uid !== uid && st.uid !== 0) return `${d} is owned by another user (uid ${st.uid})`;
    if (st.mode & 0o022 && !(st.mode & 0o1000)) return `${d} is writable by other users (mode ${mode(st)})`;
    if (path.dirname(d) === d) break;
  }
  return undefined;
}

export function enableCliCompileCache(
  env: NodeJS.ProcessEnv = process.env,
  notice: (line: string) => void = (l) => process.stderr.write(`${l}\n`),
): void {
  if (env.NODE_DISABLE_COMPILE_CACHE) return;
  const dir = compileCacheDir(env);
  if (dir === undefined || !madeFolder(dir)) return;
  // NODE_COMPILE_CACHE was chosen by the user, and Node enabled it before this code ran.
  if (!env.NODE_COMPILE_CACHE) {
    let reason: string | undefined;
    try {
      reason = unsafeCacheReason(dir, path.dirname(path.dirname(dir)));
    } catch (e) {
      reason = `it cannot be checked (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`;
    }
    if (reason) {
      notice(
        `kms-sync: not using the compile cache: ${reason}; remove ${dir} (kms-sync recreates it private) or set NODE_DISABLE_COMPILE_CACHE=1`,
      );
      return;
    }
  }
  try {
    module.enableCompileCache(dir);
    // Its per-version folder, made just now with the umask's mode: private like ours.
    if (!env.NODE_COMPILE_CACHE && process.platform !== 'win32')
      for (const name of readdirSync(dir)) chmodSync(path.join(dir, name), 0o700);
  } catch {
    // An optimisation only.
  }
}
