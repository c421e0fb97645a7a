// Files that another local user must not be able to change, for things that run as us (the
// provider Terraform starts with KMS_API_KEY in its environment, its CLI configuration): folders are
// made one level at a time and chmod'ed to an exact mode, so no umask widens them; a folder that
// another user owns or may write, on the way to a file or above it, is refused; every file is
// written through a temp file with a random name opened with O_EXCL (never through a name another
// user could have pre-created or linked elsewhere), then renamed into place.
import { randomBytes } from 'node:crypto';
import {
  chmodSync,
  closeSync,
  constants as fsc,
  fchmodSync,
  fsyncSync,
  lstatSync,
  mkdirSync,
  openSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
  writeSync,
  type Stats,
} from 'node:fs';
import path from 'node:path';

const octal = (st: Stats) => `0${(st.mode & 0o7777).toString(8)}`;

/**
 * Why a folder `dir` (which exists) is not safe to put files into, or undefined when it is: it must
 * be a real folder (not a symbolic link) owned by us or root that no one else may write.
 */
export function unsafeFolderReason(dir: string, uid = process.getuid?.()): string | undefined {
  if (uid === undefined) return undefined; // no uids (Windows): nothing to compare
  const st = lstatSync(dir);
  if (st.isSymbolicLink()) {
    const real = realpathSync(dir);
    return unsafeFolderReason(real, uid) ?? unsafeAncestorsReason(real, uid);
  }
  if (!st.isDirectory()) return `${dir} is not a folder`;
  if (st.uid !== uid && st.uid !== 0) return `${dir} is owned by another user (uid ${st.uid})`;
  if (st.mode & 0o022) return `${dir} is writable by other users (mode ${octal(st)})`;
  return undefined;
}

/**
 * Why the folders above `dir` (not `dir` itself) let someone else replace it, or undefined: each must
 * be owned by us or root and not writable by others, unless sticky (as /tmp, where no one may
 * rename or remove an entry of ours). Links on the way are followed: what matters is the folder
 * they lead to, and the folders above that.
 */
export function unsafeAncestorsReason(dir: string, uid = process.getuid?.()): string | undefined {
  if (uid === undefined) return undefined;
  for (const start of new Set([path.resolve(dir), realOrSelf(dir)])) {
    for (let d = path.dirname(start); ; d = path.dirname(d)) {
      const st = statSync(d);
      if (st.uid !== uid && st.uid !== 0) return `${d} is owned by another user (uid ${st.uid})`;
      if (st.mode & 0o022 && !(st.mode & 0o1000)) return `${d} is writable by other users (mode ${octal(st)})`;
      if (path.dirname(d) === d) break;
    }
  }
  return undefined;
}

function realOrSelf(p: string): string {
  // The nearest folder that exists, resolved, with the missing rest appended.
  const rest: string[] = [];
  for (let d = path.resolve(p); ; d = path.dirname(d)) {
    try {
      return path.join(realpathSync(d), ...rest);
    } catch {
      if (path.dirname(d) === d) return path.resolve(p);
      rest.unshift(path.basename(d));
    }
  }
}

/**
 * Why files may not be written into `dir` (made later if missing) with `top` as the highest folder
 * of ours: every existing folder from `top` down to `dir` must pass unsafeFolderReason, and the
 * folders above `top` unsafeAncestorsReason. Undefined when all is well.
 */
export function unsafeTreeReason(dir: string, top: string, uid = process.getuid?.()): string | undefined {
  if (uid === undefined) return undefined;
  const from = path.resolve(top);
  const to = path.resolve(dir);
  const rel = path.relative(from, to);
  if (rel.startsWith('..') || path.isAbsolute(rel)) throw new Error(`${to} is not inside ${from}`);
  const chain = [
    from,
    ...rel
      .split(path.sep)
      .filter(Boolean)
      .map((_, i, parts) => path.join(from, ...parts.slice(0, i + 1))),
  ];
  for (const d of chain) {
    if (!exists(d)) break;
    const bad = unsafeFolderReason(d, uid);
    if (bad) return bad;
  }
  // Above `top` (or, when `top` is missing, above the first folder that will be made on the way to it).
  let first = from;
  while (!exists(path.dirname(first)) && path.dirname(first) !== first) first = path.dirname(first);
  return unsafeAncestorsReason(first, uid);
}

function exists(p: string): boolean {
  try {
    lstatSync(p);
    return true;
  } catch {
    return false;
  }
}

/**
 * Makes `dir` and its missing parents, each exactly `mode` whatever the umask. A folder that
 * appears between the check and the mkdir (EEXIST) is checked like an existing one.
 */
export function makeFolders(dir: string, mode = 0o755, uid = process.getuid?.()): void {
  const missing: string[] = [];
  for (let d = path.resolve(dir); !exists(d); d = path.dirname(d)) {
    if (path.dirname(d) === d) break;
    missing.unshift(d);
  }
  for (const d of missing) {
    try {
      mkdirSync(d, { mode });
      if (process.platform !== 'win32') chmodSync(d, mode);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EEXIST') throw e;
      const bad = unsafeFolderReason(d, uid);
      if (bad) throw new Error(`${bad}: it appeared while kms-sync was making it`);
    }
  }
}

/**
 * Writes `data` to `file` with exactly `mode`: a temp file with a random name beside it, opened
 * with O_CREAT|O_EXCL|O_NOFOLLOW (a name planted there, or a link, makes the open fail instead of
 * being written through), flushed to disk, then renamed over `file`.
 */
export function writeFileSafely(file: string, data: Buffer | string, mode: number): void {
  const tmp = path.join(path.dirname(file), `.${path.basename(file)}.${randomBytes(8).toString('hex')}.tmp`);
  let opened = false;
  let renamed = false;
  try {
    const fd = openSync(tmp, fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL | (fsc.O_NOFOLLOW ?? 0), mode);
    opened = true;
    try {
      if (process.platform !== 'win32') fchmodSync(fd, mode);
      const buf = typeof data === 'string' ? Buffer.from(data, 'utf8') : data;
      for (let off = 0; off < buf.length; ) off += writeSync(fd, buf, off, buf.length - off);
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    renameSync(tmp, file);
    renamed = true;
  } catch (err) {
    throw writeError(file, err);
  } finally {
    // A full disk (ENOSPC, EDQUOT, EFBIG) fails the write after the open: no temp file stays behind
    // (and a name this call did not create is never removed).
    if (opened && !renamed) rmSync(tmp, { force: true });
  }
}

/**
 * A failed write as an error that names the file it was for: a write(2) error says only "ENOSPC:
 * no space left on device, write", and an open or rename one names the temp file. The code and
 * syscall stay (callers and the CLI's describeFsError read them); `path` is the target when the
 * error had none.
 */
export function writeError(target: string, err: unknown): Error {
  const e = err as NodeJS.ErrnoException;
  if (typeof e?.message !== 'string' || e.message.includes(`cannot write ${target}:`)) return err as Error;
  return Object.assign(new Error(`cannot write ${target}: ${e.message}`, { cause: err }), {
    ...(e.code !== undefined ? { code: e.code } : {}),
    ...(e.errno !== undefined ? { errno: e.errno } : {}),
    syscall: e.syscall ?? 'write',
    path: e.path ?? target,
  });
}
