// A file-system error from deep inside a command ("ENOENT: no such file or directory, open
// 'plan.json.4711.tmp'") rewritten as a sentence about the path the user gave or owns: the target
// of a temp file rather than the temp file, which folder is missing, which part of a path is a file.
import { statSync } from 'node:fs';
import path from 'node:path';

interface FsError {
  code: string;
  syscall?: string;
  path: string;
  dest?: string;
}

/** Folders kms-sync creates beside a configuration, and why (said when something is in the way). */
const KNOWN_FOLDERS: Record<string, string> = {
  '.kms-sync': 'where kms-sync keeps its run lock and key journal',
};

function isFsError(e: unknown): e is FsError {
  const x = e as Partial<FsError> | null;
  return Boolean(x && typeof x.code === 'string' && /^E[A-Z]+$/.test(x.code) && typeof x.path === 'string');
}

/** The file a temp file stands for: `plan.json.4711.tmp` and `.keys.txt.tmp-4711-ab12` are writes of plan.json and keys.txt. */
export function userPath(p: string): string {
  const dir = path.dirname(p);
  const base = path.basename(p);
  const pidTmp = /^(.+)\.\d+(?:-[0-9a-f]+)?\.tmp$/.exec(base);
  if (pidTmp) return path.join(dir, pidTmp[1]!);
  const hiddenTmp = /^\.(.+?)\.tmp-[\w-]*$/.exec(base);
  if (hiddenTmp) return path.join(dir, hiddenTmp[1]!);
  return p;
}

const isTemp = (p: string) => userPath(p) !== p;

function shown(p: string, cwd: string): string {
  const abs = path.resolve(cwd, p);
  const rel = path.relative(cwd, abs);
  return rel && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel : abs;
}

/** The deepest existing ancestor of `p`, and whether it is a file (then it is what blocks the path). */
function blockingFile(p: string): string | undefined {
  for (let at = path.dirname(p); ; at = path.dirname(at)) {
    try {
      return statSync(at).isDirectory() ? undefined : at;
    } catch {
      if (path.dirname(at) === at) return undefined;
    }
  }
}

function missingFolder(p: string): string | undefined {
  for (let at = path.dirname(p), last: string | undefined; ; last = at, at = path.dirname(at)) {
    try {
      statSync(at);
      return last;
    } catch {
      if (path.dirname(at) === at) return last;
    }
  }
}

/** A user-facing message for a file-system error, or undefined when `e` is not one. */
export function describeFsError(e: unknown, cwd: string = process.cwd()): string | undefined {
  if (!isFsError(e)) return undefined;
  const abs = path.resolve(cwd, e.path);
  const target = userPath(abs);
  const name = shown(target, cwd);
  const writing = isTemp(abs) || ['mkdir', 'rename', 'unlink', 'write', 'fsync'].includes(e.syscall ?? '');
  const verb = e.syscall === 'mkdir' ? 'create the folder' : writing ? 'write' : 'read';
  const known = KNOWN_FOLDERS[path.basename(target)];
  switch (e.code) {
    case 'ENOENT': {
      if (!writing) return `${name}: no such file or folder`;
      const missing = missingFolder(abs);
      return missing
        ? `cannot ${verb} ${name}: the folder ${shown(missing, cwd)} does not exist`
        : `cannot ${verb} ${name}: no such file or folder`;
    }
    case 'ENOTDIR': {
      const file = blockingFile(abs);
      return `cannot ${verb} ${name}: ${file ? `${shown(file, cwd)} is a file, not a folder` : 'a part of the path is a file, not a folder'}`;
    }
    case 'EEXIST':
      if (e.syscall === 'mkdir') {
        return `cannot create the folder ${name}${known ? ` (${known})` : ''}: a file of that name is in the way; move or remove it`;
      }
      return `${name} already exists: refusing to overwrite it`;
    case 'EISDIR':
      return `cannot ${verb} ${name}: it is a folder, not a file`;
    case 'EACCES':
    case 'EPERM':
      return `cannot ${verb} ${name}: permission denied (check the owner and mode of ${shown(writing ? path.dirname(target) : target, cwd)})`;
    case 'EROFS':
      return `cannot ${verb} ${name}: the file system is read-only`;
    case 'ENOSPC':
    case 'EDQUOT':
      return `cannot ${verb} ${name}: no space left on the device (or the disk quota is used up)`;
    case 'ENAMETOOLONG':
      return `cannot ${verb} ${name}: the path is too long`;
    case 'ELOOP':
      return `cannot ${verb} ${name}: too many symbolic links (a link loop?)`;
    case 'EMFILE':
    case 'ENFILE':
      return `cannot ${verb} ${name}: too many open files (raise ulimit -n)`;
    default:
      return `cannot ${verb} ${name}: ${e.code}`;
  }
}
