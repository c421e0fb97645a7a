// The agent's --state-dir holds the journal, the default store, the age key and a git checkout
// whose hooks git would run: a folder another user may write (or replace) is refused at start,
// with the compile cache's rules (compile-cache.ts): it and its entries ours (or root's, who may do
// anything anyway: a volume's root, its lost+found) and not writable by others, nor by a group other
// than our own primary one (a Kubernetes volume with `fsGroup` is group-writable by it), and every
// folder above it ours or root's and not writable by others unless sticky.
import { lstatSync, readdirSync, realpathSync, type Stats } from 'node:fs';
import path from 'node:path';
import { unsafeParentReason } from './compile-cache.js';

const mode = (st: Stats) => `0${(st.mode & 0o7777).toString(8)}`;

/** Why `dir` must not be the agent's state folder, or undefined. A folder that does not exist yet is judged by its parents (the agent makes it 0700). */
export function unsafeStateDirReason(
  dir: string,
  uid = process.getuid?.(),
  gid = process.getgid?.(),
): string | undefined {
  if (uid === undefined) return undefined; // no uids (Windows)
  let real: string;
  try {
    real = realpathSync(dir);
  } catch {
    return unsafeParentReason(path.join(nearestExisting(dir), 'new'), undefined, uid);
  }
  const st = lstatSync(real);
  if (!st.isDirectory()) return `${dir} is not a folder`;
  const own = checkOne(real, uid, gid);
  if (own) return own;
  for (const name of readdirSync(real)) {
    const entry = lstatSync(path.join(real, name));
    if (entry.isSymbolicLink()) return `${path.join(real, name)} is a symbolic link`;
    const bad = checkOne(path.join(real, name), uid, gid, entry);
    if (bad) return bad;
  }
  return unsafeParentReason(real, undefined, uid);
}

function nearestExisting(dir: string): string {
  let d = path.resolve(dir);
  for (;;) {
    try {
      return realpathSync(d);
    } catch {
      if (path.dirname(d) === d) return d;
      d = path.dirname(d);
    }
  }
}

function checkOne(p: string, uid: number, gid: number | undefined, st: Stats = lstatSync(p)): string | undefined {
  if (st.uid !== uid && st.uid !== 0) return `${p} is owned by another user (uid ${st.uid})`;
  if (st.mode & 0o002) return `${p} is writable by other users (mode ${mode(st)})`;
  if (st.mode & 0o020 && st.gid !== gid) return `${p} is writable by its group (gid ${st.gid}, mode ${mode(st)})`;
  return undefined;
}
