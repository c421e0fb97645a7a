/**
 * Crash-safe file primitives shared by the file store and the journal: an exclusive lock file with
 * stale-lock detection, atomic replace (temp file + fsync + rename + directory fsync), and
 * directory fsync. Errors thrown here are plain fs errors; callers wrap them in SecretStoreError.
 */
import { constants as fsc } from 'node:fs';
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import { writeError } from '../model/safe-files.js';

export const FILE_MODE = 0o600;
export const DIR_MODE = 0o700;

/** fsync a directory so that a rename / create / unlink in it survives a power cut. */
export async function fsyncDir(dir: string): Promise<void> {
  let fh: fs.FileHandle | undefined;
  try {
    fh = await fs.open(dir, fsc.O_RDONLY | (fsc.O_DIRECTORY ?? 0));
    await fh.sync();
  } catch (err) {
    // Some filesystems refuse fsync on directories (EINVAL / EISDIR / EPERM); nothing more can be done there.
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'EINVAL' && code !== 'EISDIR' && code !== 'EPERM' && code !== 'EBADF') throw err;
  } finally {
    await fh?.close();
  }
}

/** mkdir -p, creating missing directories with mode 0700 (existing ones are left alone). */
export async function ensureDir(dir: string): Promise<void> {
  await fs.mkdir(dir, { recursive: true, mode: DIR_MODE });
}

export async function fileExists(p: string): Promise<boolean> {
  try {
    await fs.stat(p);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}

/** Read a file, or undefined when it does not exist. */
export async function readIfExists(p: string): Promise<Buffer | undefined> {
  try {
    return await fs.readFile(p);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

/**
 * Reads the file at `p` when it is not exactly `expected`. Equal bytes are checked in `scratch`
 * (a buffer kept by the caller, grown when too small) instead of a new buffer: a store that checks
 * its file before and after each write reads a large file every time, and a new buffer for each
 * read is garbage the size of the file. Returns 'same', the file's bytes when they differ, or
 * undefined when there is no file.
 */
export async function readUnlessSame(
  p: string,
  expected: Uint8Array,
  scratch: { buf: Buffer },
): Promise<'same' | Buffer | undefined> {
  let fh: fs.FileHandle;
  try {
    fh = await fs.open(p, 'r');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  try {
    const { size } = await fh.stat();
    if (size === expected.length) {
      if (scratch.buf.length < size + 1) scratch.buf = Buffer.allocUnsafe(size + 1 + (size >> 3));
      let got = 0;
      for (;;) {
        // One byte more than expected: a file that grew since the stat does not read as the same.
        const { bytesRead } = await fh.read(scratch.buf, got, size + 1 - got, got);
        if (bytesRead === 0) break;
        got += bytesRead;
        if (got > size) break;
      }
      if (got === size && scratch.buf.subarray(0, size).equals(expected)) return 'same';
    }
  } finally {
    await fh.close();
  }
  return readIfExists(p);
}

const TMP_MARK = '.tmp-';

function tempPathFor(target: string): string {
  const dir = path.dirname(target);
  const base = path.basename(target);
  return path.join(dir, `.${base}${TMP_MARK}${process.pid}-${randomBytes(6).toString('hex')}`);
}

/**
 * Replace `target` atomically: write a temp file in the same directory (`mode`, 0600 unless told), fsync it,
 * rename it over the target, fsync the directory. A crash at any point leaves either the old or
 * the new content, plus at worst a stray temp file (removed by `removeStaleTemps`).
 */
export async function atomicWriteFile(target: string, data: string | Uint8Array, mode = FILE_MODE): Promise<void> {
  const tmp = tempPathFor(target);
  let fh: fs.FileHandle | undefined;
  let renamed = false;
  try {
    fh = await fs.open(tmp, fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL, mode);
    await fh.writeFile(data);
    await fh.chmod(mode);
    await fh.sync();
    await fh.close();
    await fs.rename(tmp, target);
    renamed = true;
    await fsyncDir(path.dirname(target));
  } catch (err) {
    throw writeError(target, err);
  } finally {
    if (fh && !renamed) {
      await fh.close().catch(() => undefined);
      // A full disk (ENOSPC, EDQUOT, EFBIG) fails the write after the open: no temp file stays behind.
      await fs.unlink(tmp).catch(() => undefined);
    }
  }
}

/** Remove temp files left by writers that died (their pid is gone). Call while holding the lock. */
export async function removeStaleTemps(target: string): Promise<void> {
  const dir = path.dirname(target);
  const prefix = `.${path.basename(target)}${TMP_MARK}`;
  let names: string[];
  try {
    names = await fs.readdir(dir);
  } catch {
    return;
  }
  for (const name of names) {
    if (!name.startsWith(prefix)) continue;
    const pid = Number.parseInt(name.slice(prefix.length).split('-')[0] ?? '', 10);
    if (Number.isInteger(pid) && pid > 0 && pid !== process.pid && !pidAlive(pid)) {
      await fs.unlink(path.join(dir, name)).catch(() => undefined);
    }
  }
}

export function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

// ---------------------------------------------------------------------------------------------
// Lock file

interface LockInfo {
  pid: number;
  host: string;
  createdAt: string;
  /** Set by a holder that owns a state folder (the agent): which folder, and which start of its owner. */
  state?: string;
  instance?: string;
}

/**
 * A process that owns a state folder exclusively (the agent holds a kernel lock on it for its whole
 * life, agent/state-owner.ts): a lock recorded by another incarnation of the same folder's owner
 * belongs to a process that is gone, whatever its pid and host say (a restarted PID 1, a new pod).
 */
export interface StateIncarnation {
  state: string;
  instance: string;
}

/** Whether `holder` was left by an earlier incarnation of the state folder `me` owns now. */
export function earlierIncarnation(
  holder: { state?: unknown; instance?: unknown },
  me: StateIncarnation | undefined,
): boolean {
  return (
    me !== undefined &&
    holder.state === me.state &&
    typeof holder.instance === 'string' &&
    holder.instance !== me.instance
  );
}

export class LockTimeoutError extends Error {
  readonly lockPath: string;
  readonly holder: LockInfo | undefined;
  constructor(lockPath: string, holder: LockInfo | undefined) {
    const who = holder ? `pid ${holder.pid} on ${holder.host} since ${holder.createdAt}` : 'another process';
    super(`${lockPath} is held by ${who}; if no kms-sync is running, remove that file`);
    this.name = 'LockTimeoutError';
    this.lockPath = lockPath;
    this.holder = holder;
  }
}

export interface LockOptions {
  timeoutMs?: number;
  /** Stop waiting for another process's lock (an interrupt); the error is the signal's reason. */
  signal?: AbortSignal;
  /** Called once when the lock is found held by a live process and the caller starts to wait for it. */
  onWait?: (holder: LockInfo | undefined) => void;
  /** The caller owns this state folder (StateIncarnation): it records it, and breaks what earlier incarnations left. */
  incarnation?: StateIncarnation;
}

export interface FileLock {
  release(): Promise<void>;
}

/**
 * In-process queue per lock path: callers in one process line up here (in order, without polling)
 * and only the first in line contends for the lock file with other processes.
 */
const localQueues = new Map<string, Promise<void>>();

/**
 * Take an exclusive lock `lockPath` (O_CREAT|O_EXCL). A lock whose holder pid is dead on this host
 * is stale and is broken; breaking is itself guarded by `<lock>.break` so that two waiters cannot
 * both break and then delete each other's fresh lock.
 */
export async function acquireLock(lockPath: string, opts: LockOptions = {}): Promise<FileLock> {
  const timeoutMs = opts.timeoutMs ?? 10_000;
  const prev = localQueues.get(lockPath) ?? Promise.resolve();
  let releaseLocal!: () => void;
  const mine = new Promise<void>((resolve) => {
    releaseLocal = resolve;
  });
  const chained = prev.then(() => mine);
  localQueues.set(lockPath, chained);
  const cleanupLocal = (): void => {
    releaseLocal();
    if (localQueues.get(lockPath) === chained) localQueues.delete(lockPath);
  };
  try {
    // Waiting for this process's own earlier holders has no time limit: they always release, and a
    // timeout there would report our own queue as "held by another process". The time limit
    // applies to the file lock alone, from the moment this caller is first in line.
    await prev;
    await acquireFileLock(lockPath, timeoutMs, opts.signal, opts.incarnation, opts.onWait);
  } catch (err) {
    cleanupLocal();
    throw err;
  }
  let released = false;
  return {
    release: async () => {
      if (released) return;
      released = true;
      try {
        await fs.unlink(lockPath).catch((err: NodeJS.ErrnoException) => {
          if (err.code !== 'ENOENT') throw err;
        });
      } finally {
        cleanupLocal();
      }
    },
  };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

async function acquireFileLock(
  lockPath: string,
  timeoutMs: number,
  signal?: AbortSignal,
  me?: StateIncarnation,
  onWait?: (holder: LockInfo | undefined) => void,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const info: LockInfo = {
    pid: process.pid,
    host: os.hostname(),
    createdAt: new Date().toISOString(),
    ...(me ? { state: me.state, instance: me.instance } : {}),
  };
  let delay = 5;
  let announced = false;
  for (;;) {
    if (await tryCreateLock(lockPath, info)) {
      await removeStaleTemps(lockPath);
      return;
    }
    const holder = await readLockInfo(lockPath);
    if (await breakIfStale(lockPath, holder, me)) continue;
    if (Date.now() >= deadline) throw new LockTimeoutError(lockPath, holder ?? undefined);
    signal?.throwIfAborted();
    if (!announced) onWait?.(holder ?? undefined);
    announced = true;
    await sleep(delay);
    delay = Math.min(delay * 2, 100);
  }
}

/**
 * Create the lock with its content in one step: write a temp file, then link(2) it to the lock
 * path (atomic, fails if the lock exists). So a lock file is never seen empty, even when its
 * writer is killed. Falls back to O_EXCL where hard links are not supported.
 */
async function tryCreateLock(lockPath: string, info: LockInfo): Promise<boolean> {
  const tmp = tempPathFor(lockPath);
  try {
    await fs.writeFile(tmp, JSON.stringify(info), { mode: FILE_MODE, flag: 'wx' });
  } catch (err) {
    // A full disk (ENOSPC) creates the file and fails the write: no empty temp file stays behind,
    // and the error names the lock it was for.
    await fs.unlink(tmp).catch(() => undefined);
    const e = err as NodeJS.ErrnoException;
    throw Object.assign(new Error(`cannot create the lock file ${lockPath}: ${e.message}`.replace(/\s+/g, ' ')), {
      code: e.code,
    });
  }
  try {
    await fs.link(tmp, lockPath);
    return true;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'EEXIST') return false;
    if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP' && code !== 'ENOSYS') throw err;
  } finally {
    await fs.unlink(tmp).catch(() => undefined);
  }
  try {
    await fs.writeFile(lockPath, JSON.stringify(info), { mode: FILE_MODE, flag: 'wx' });
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    // Created by this call and left empty (ENOSPC): removed, not left for every later run to trip on.
    await fs.unlink(lockPath).catch(() => undefined);
    const e = err as NodeJS.ErrnoException;
    throw Object.assign(new Error(`cannot create the lock file ${lockPath}: ${e.message}`.replace(/\s+/g, ' ')), {
      code: e.code,
    });
  }
}

/** undefined: no lock file; null: a lock file whose content is not (yet) readable. */
async function readLockInfo(lockPath: string): Promise<LockInfo | null | undefined> {
  let text: string;
  try {
    text = await fs.readFile(lockPath, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  try {
    const v = JSON.parse(text) as Partial<LockInfo>;
    if (typeof v.pid === 'number' && typeof v.host === 'string' && typeof v.createdAt === 'string') {
      return {
        pid: v.pid,
        host: v.host,
        createdAt: v.createdAt,
        ...(typeof v.state === 'string' ? { state: v.state } : {}),
        ...(typeof v.instance === 'string' ? { instance: v.instance } : {}),
      };
    }
  } catch {
    // fall through
  }
  return null;
}

/** A lock file that stays empty/unreadable this long belongs to a writer killed between create and write. */
const UNREADABLE_LOCK_STALE_MS = 2_000;
/** Breaking takes microseconds; a `.break` file older than this was left by a killed breaker. */
const BREAK_LOCK_STALE_MS = 2_000;

async function isStale(lockPath: string, holder: LockInfo | null, me?: StateIncarnation): Promise<boolean> {
  if (holder !== null && earlierIncarnation(holder, me)) return true;
  if (holder === null) {
    try {
      const st = await fs.stat(lockPath);
      return Date.now() - st.mtimeMs > UNREADABLE_LOCK_STALE_MS;
    } catch {
      return false;
    }
  }
  if (holder.host !== os.hostname()) return false;
  if (holder.pid === process.pid) return false;
  return !pidAlive(holder.pid);
}

async function breakIfStale(
  lockPath: string,
  holder: LockInfo | null | undefined,
  me?: StateIncarnation,
): Promise<boolean> {
  if (holder === undefined) return true; // vanished meanwhile: try again at once
  if (!(await isStale(lockPath, holder, me))) return false;
  const breakPath = `${lockPath}.break`;
  let fh: fs.FileHandle;
  try {
    fh = await fs.open(breakPath, fsc.O_WRONLY | fsc.O_CREAT | fsc.O_EXCL, FILE_MODE);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    try {
      const st = await fs.stat(breakPath);
      if (Date.now() - st.mtimeMs > BREAK_LOCK_STALE_MS) await fs.unlink(breakPath).catch(() => undefined);
    } catch {
      // gone already
    }
    return false;
  }
  try {
    await fh.close();
    // Re-read under the break lock: only remove the very lock we judged stale.
    const again = await readLockInfo(lockPath);
    if (again === undefined) return true;
    const same =
      (again === null && holder === null) ||
      (again !== null && holder !== null && again.pid === holder.pid && again.createdAt === holder.createdAt);
    if (same && (await isStale(lockPath, again, me))) {
      await fs.unlink(lockPath).catch(() => undefined);
      return true;
    }
    return false;
  } finally {
    await fs.unlink(breakPath).catch(() => undefined);
  }
}

/** Run `fn` holding the lock. */
export async function withLock<T>(lockPath: string, opts: LockOptions, fn: () => Promise<T>): Promise<T> {
  const lock = await acquireLock(lockPath, opts);
  try {
    return await fn();
  } finally {
    await lock.release();
  }
}
