// `-f` arguments → the sorted list of configuration files (YAML, and JSON) to load, each inside its
// root: a configuration is reviewed data written by many (a pull request, a commit on the watched
// branch), so a link it commits must not make kms-sync read a host file (/proc/self/environ, a
// file-mounted secret, /etc/passwd) into a CI log or the agent's page. Paths are resolved
// (realpath) once per -f argument and per link found, never per file or per resource.
import { isAscii } from 'node:buffer';
import { closeSync, constants, fstatSync, openSync, readSync, type BigIntStats } from 'node:fs';
import { lstat, open, readdir, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError, type Diagnostic } from './diagnostics.js';
import { formatSize, type ConfigLimits } from './limits.js';

/** Where configuration files may come from (the operator's choice, never the configuration's). */
export interface FileRules {
  /**
   * The folder every file must resolve inside (the agent: its checkout). Without it, a relative
   * -f path inside the working directory must resolve inside the working directory, and every
   * file inside the folder named by -f (a file named directly: inside its folder).
   */
  root?: string;
  /** Refuse every symbolic link, in the -f paths below `root` and among the files (the agent). */
  refuseLinks?: boolean;
}

const CONFIG_FILE = /\.(ya?ml|json)$/i;

/** Display form of a file: relative to `cwd`, with forward slashes. */
export function displayPath(file: string, cwd: string): string {
  const rel = path.relative(cwd, file);
  return (rel === '' ? path.basename(file) : rel).split(path.sep).join('/');
}

/**
 * A JSON file found in a folder is configuration when its beginning names a field of the format
 * (`apiVersion`, `projects`, `stores`) and it is none of kms-sync's own outputs (a saved plan, a
 * JSON plan or report, recognised by their first field): a package.json, tsconfig.json,
 * cdktf.json or saved plan beside the configuration is not read, nor a JSON Schema (the `kms-sync.schema.json` copy that
 * `init` writes names those fields too). A file named with -f is always read.
 */
async function isConfigJson(file: string): Promise<boolean> {
  const fh = await open(file, 'r').catch(() => undefined);
  if (!fh) return true; // let the loader report why it cannot be read
  try {
    const { bytesRead, buffer } = await fh.read(Buffer.alloc(4096), 0, 4096, 0);
    const head = buffer.subarray(0, bytesRead).toString('utf8');
    if (/"\$schema"\s*:\s*"https?:\/\/json-schema\.org\//.test(head)) return false;
    // kms-sync's own outputs name what they are: a saved plan (`kind`, first), a JSON plan or
    // drift report (`format_version`, first). Their `"projects":` inside `target` is no configuration.
    if (/^\s*\{\s*"(kind"\s*:\s*"kms-sync\/|format_version")/.test(head)) return false;
    return /"(apiVersion|projects|stores)"\s*:/.test(head);
  } finally {
    await fh.close();
  }
}

/** Whether `inner` (a resolved path) is `outer` or below it. */
export function isInside(inner: string, outer: string): boolean {
  const rel = path.relative(outer, inner);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

/** A file or folder that leaves its root, named without saying where the link points. */
function outside(file: string, root: string): Diagnostic {
  return {
    file,
    line: 0,
    column: 0,
    path: '',
    message: `resolves outside ${root} (through a symbolic link): configuration is read only inside its folder, and the file is not read`,
  };
}

function linkRefused(file: string): Diagnostic {
  return {
    file,
    line: 0,
    column: 0,
    path: '',
    message:
      'is a symbolic link: the agent follows no links in its configuration (commit the file itself), and it is not read',
  };
}

/**
 * Configuration files under `dir` (real path `realDir`). A regular file found by the walk is
 * inside `realDir` by construction; only links are resolved, and one that leaves it is reported.
 */
async function walk(
  dir: string,
  realDir: string,
  out: string[],
  shown: (f: string) => string,
  rules: FileRules,
  diagnostics: Diagnostic[],
): Promise<void> {
  const entries = await readdir(dir, { withFileTypes: true });
  for (const entry of entries) {
    if (entry.name.startsWith('.') || entry.name === 'node_modules') continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      await walk(full, path.join(realDir, entry.name), out, shown, rules, diagnostics);
    } else if (CONFIG_FILE.test(entry.name)) {
      if (entry.isSymbolicLink()) {
        if (rules.refuseLinks) {
          diagnostics.push(linkRefused(shown(full)));
          continue;
        }
        const real = await realpath(full).catch(() => undefined);
        if (real === undefined) continue; // a dangling link is no file (as before)
        if (!isInside(real, realDir)) {
          diagnostics.push(outside(shown(full), shown(dir)));
          continue;
        }
        if (!(await stat(real).catch(() => undefined))?.isFile()) continue;
      } else if (!entry.isFile()) continue;
      if (!/\.json$/i.test(entry.name) || (await isConfigJson(full))) out.push(full);
    }
  }
}

/** The first symbolic link among the components of `full` below `root` (both absolute), if any. */
async function linkBelow(full: string, root: string): Promise<string | undefined> {
  const rel = path.relative(root, full);
  if (rel === '' || rel.startsWith('..') || path.isAbsolute(rel)) return undefined;
  let at = root;
  for (const part of rel.split(path.sep)) {
    at = path.join(at, part);
    if ((await lstat(at).catch(() => undefined))?.isSymbolicLink()) return at;
  }
  return undefined;
}

export interface FoundFile {
  path: string;
  /** Named directly with -f (rather than found in a folder). */
  named: boolean;
}

/** Like expandPaths, but reports problems into `diagnostics` instead of throwing. */
export async function collectFiles(
  paths: readonly string[],
  cwd: string,
  diagnostics: Diagnostic[],
  rules: FileRules = {},
): Promise<FoundFile[]> {
  const files = new Map<string, boolean>();
  if (paths.length === 0) {
    diagnostics.push({
      file: '<arguments>',
      line: 0,
      column: 0,
      path: '',
      message: 'no configuration files or folders given',
    });
  }
  const shown = (f: string) => {
    const rel = path.relative(cwd, f);
    return rel === '' ? '.' : rel.split(path.sep).join('/');
  };
  const root = rules.root !== undefined ? path.resolve(cwd, rules.root) : undefined;
  const realRoot = root !== undefined ? await realpath(root).catch(() => root) : undefined;
  let realCwd: string | undefined;
  for (const p of paths) {
    const full = path.resolve(cwd, p);
    if (rules.refuseLinks && root !== undefined) {
      const link = await linkBelow(full, root);
      if (link !== undefined) {
        diagnostics.push(linkRefused(shown(link)));
        continue;
      }
    }
    const info = await stat(full).catch(() => undefined);
    if (!info) {
      diagnostics.push({ file: p, line: 0, column: 0, path: '', message: 'no such file or folder' });
      continue;
    }
    // The -f path itself: inside the agent's root, or (a relative path inside the working
    // directory, as a workflow names one) inside the working directory. A path the operator
    // names outside them (absolute, or with ..) is theirs to name.
    const real = await realpath(full);
    if (realRoot !== undefined) {
      if (!isInside(real, realRoot)) {
        diagnostics.push(outside(p, shown(root!)));
        continue;
      }
    } else if (!path.isAbsolute(p) && isInside(full, cwd)) {
      realCwd ??= await realpath(cwd).catch(() => cwd);
      if (!isInside(real, realCwd)) {
        diagnostics.push(outside(p, 'the working directory'));
        continue;
      }
    }
    if (info.isDirectory()) {
      const found: string[] = [];
      const reported = diagnostics.length;
      await walk(full, real, found, shown, rules, diagnostics);
      if (found.length === 0 && diagnostics.length === reported) {
        diagnostics.push({
          file: p,
          line: 0,
          column: 0,
          path: '',
          message: 'folder contains no *.yaml, *.yml or *.json files',
        });
      }
      for (const f of found) if (!files.has(f)) files.set(f, false);
    } else {
      // A file named directly: inside its own folder (a link beside it, not out of it).
      const realDir = await realpath(path.dirname(full)).catch(() => path.dirname(full));
      if (!isInside(real, realDir)) diagnostics.push(outside(p, shown(path.dirname(full))));
      else files.set(full, true);
    }
  }
  // Code-unit order, independent of locale and of the order of the arguments.
  return [...files]
    .map(([f, named]) => ({ path: f, named }))
    .sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/**
 * Expands files and folders (all *.yaml / *.yml / *.json inside, recursively, hidden folders skipped) into
 * a de-duplicated, sorted list of absolute paths. Throws ConfigError for missing paths.
 */
export async function expandPaths(
  paths: readonly string[],
  opts: { cwd?: string } & FileRules = {},
): Promise<string[]> {
  const cwd = path.resolve(opts.cwd ?? process.cwd());
  const diagnostics: Diagnostic[] = [];
  const files = await collectFiles(paths, cwd, diagnostics, opts);
  if (diagnostics.length > 0) throw new ConfigError(diagnostics);
  return files.map((f) => f.path);
}

/**
 * What reading one configuration file gave: its bytes, or why it was not read. `at`: the file and
 * its identity when it did not change while it was read (FileAt), for reading parts of it again.
 */
export type ReadResult = { bytes: Buffer; at?: FileAt } | { problem: string };

/**
 * A file read once, to read parts of again by offset (readPart): its path and what identifies its
 * content (device, inode, size, modification and change times, in nanoseconds). Plain data: it
 * goes to worker threads.
 */
export interface FileAt {
  path: string;
  identity: string;
  noFollow: boolean;
}

function identityOf(st: BigIntStats): string {
  return `${st.dev}:${st.ino}:${st.size}:${st.mtimeNs}:${st.ctimeNs}`;
}

/**
 * The text of bytes [start, end) of a file read before (`at`), an ASCII one (a byte per
 * character); undefined when the file is no longer the one read (another file at its path, or
 * its content changed: size, modification or change time), cannot be read or the bytes are not
 * ASCII: the caller loads the whole configuration again then. The file's identity is checked
 * before and after the read.
 */
export function readPart(at: FileAt, start: number, end: number): string | undefined {
  let fd: number;
  try {
    // Non-blocking: something swapped in at the path (a FIFO) never holds the thread.
    fd = openSync(at.path, constants.O_RDONLY | constants.O_NONBLOCK | (at.noFollow ? constants.O_NOFOLLOW : 0));
  } catch {
    return undefined;
  }
  try {
    if (identityOf(fstatSync(fd, { bigint: true })) !== at.identity) return undefined;
    const bytes = Buffer.allocUnsafeSlow(end - start);
    let got = 0;
    while (got < bytes.length) {
      const n = readSync(fd, bytes, got, bytes.length - got, start + got);
      if (n === 0) return undefined;
      got += n;
    }
    if (identityOf(fstatSync(fd, { bigint: true })) !== at.identity) return undefined;
    // ASCII bytes (checked at memory speed, whatever the file's times say) are their text: copied
    // as latin1 instead of decoded as UTF-8, 2.2 MB in ~0.5 ms against ~3 ms (docs/performance.md).
    return isAscii(bytes) ? bytes.toString('latin1') : undefined;
  } catch {
    return undefined;
  } finally {
    closeSync(fd);
  }
}

/**
 * Frees large binary data no longer read (a file's bytes read by readBounded once decoded, a line
 * table) now instead of at the thread's next full collection: a 221 MB configuration's bytes
 * outlived its decoding by ~10 s of a plan whose main thread allocates little, and set its peak
 * RSS (docs/performance.md). Detaching the buffer (ArrayBuffer transfer) releases its memory at
 * once; `bytes` reads as empty afterwards. Only for a view over a buffer of its own: never a slice
 * of Node's shared pool (at most Buffer.poolSize).
 */
export function letGo(bytes: ArrayBufferView): void {
  // ES2024's ArrayBuffer members (Node >= 21), not in the project's target library.
  const buffer = bytes.buffer as ArrayBuffer & { detached?: boolean; transfer?: (length: number) => ArrayBuffer };
  if (buffer instanceof ArrayBuffer && buffer.byteLength > Buffer.poolSize && !buffer.detached) buffer.transfer?.(0);
}

/**
 * Files of `from` bytes or more are read `size` bytes at a time, each piece handed to readBounded's
 * `onRead` while the next is read (a setting, so tests can use small files).
 */
export const READ_IN_PIECES = { from: 8 * 1024 * 1024, size: 4 * 1024 * 1024 };

/**
 * One configuration file's bytes, never more than `limits` allow: the size is checked before
 * reading (and the read stops one byte past the limit, for files whose size the system does not
 * say: /proc). `budget.left` is what the load may still read in all. With `noFollow` (the agent),
 * a link swapped in after the walk is not followed either. `onRead` (a large file: READ_IN_PIECES)
 * is told each time more of the file's bytes were read (`bytes`, the whole file's buffer, read up
 * to `upTo`), while the next piece is read: the thread works on what came (config/load.ts: the
 * ASCII check and the line table, ~1 s of the 221 MB file) instead of waiting for the whole
 * (~0.77 s for that file, most of it the first touch of its memory, done by the read's own thread).
 * It is told nothing of bytes past the file's size when it was opened (a file that grew).
 */
export async function readBounded(
  file: string,
  limits: ConfigLimits,
  budget: { left: number },
  noFollow = false,
  onRead?: (bytes: Buffer, upTo: number) => void,
): Promise<ReadResult> {
  const fh = await open(file, constants.O_RDONLY | (noFollow ? constants.O_NOFOLLOW : 0));
  try {
    const info = await fh.stat({ bigint: true });
    if (!info.isFile()) return { problem: 'is not a regular file' };
    const cap = Math.min(limits.fileBytes, budget.left);
    const tooBig = (size: number) =>
      size > limits.fileBytes
        ? {
            problem: `the file is larger than the limit of ${formatSize(limits.fileBytes)} per configuration file (${formatSize(size)}${size === limits.fileBytes + 1 ? ' or more' : ''}); raise it with --max-file-size or KMS_SYNC_MAX_FILE_SIZE if it is meant to be this large`,
          }
        : {
            problem: `the configuration's files together are larger than the limit of ${formatSize(limits.totalBytes)} (--max-config-size or KMS_SYNC_MAX_CONFIG_SIZE); this file is not read`,
          };
    const size = Number(info.size);
    if (size > cap) return tooBig(size);
    const chunks: Buffer[] = [];
    let total = 0;
    let ended = false;
    if (onRead && size >= READ_IN_PIECES.from && size < cap) {
      // One buffer (its size and one byte more, as below), read a piece at a time.
      const whole = Buffer.alloc(size + 1);
      let reading: Promise<{ bytesRead: number }> | undefined = fh.read(whole, 0, READ_IN_PIECES.size, null);
      while (reading) {
        const { bytesRead } = await reading;
        reading = undefined;
        if (bytesRead === 0) break;
        total += bytesRead;
        if (total < whole.length)
          reading = fh.read(whole, total, Math.min(READ_IN_PIECES.size, whole.length - total), null);
        try {
          if (total <= size) onRead(whole, total);
        } catch (e) {
          await reading?.catch(() => undefined);
          throw e;
        }
      }
      chunks.push(whole.subarray(0, total));
      // At its end before the byte past its size: read. Grown since: the rest is read below.
      ended = total < whole.length;
    }
    while (!ended) {
      const want = Math.min(Math.max(size + 1, 64 * 1024), cap + 1 - total);
      const { bytesRead, buffer } = await fh.read(Buffer.alloc(want), 0, want, null);
      if (bytesRead === 0) break;
      chunks.push(buffer.subarray(0, bytesRead));
      total += bytesRead;
      if (total > cap) return tooBig(total > limits.fileBytes ? limits.fileBytes + 1 : total);
    }
    budget.left -= total;
    const bytes = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total);
    const identity = identityOf(info);
    const same = total === size && identityOf(await fh.stat({ bigint: true })) === identity;
    return { bytes, ...(same ? { at: { path: file, identity, noFollow } } : {}) };
  } finally {
    await fh.close();
  }
}
