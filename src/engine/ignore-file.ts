// The ignore file of a run (.kmsignore in the current folder, or --ignore-file): resources it names
// are never deleted (plan/ignore.ts), for every front end.
import { lstat, readFile, realpath, stat } from 'node:fs/promises';
import { configLimits, formatSize } from '../config/limits.js';
import { isInside } from '../config/paths.js';
import { IGNORE_FILE_NAME, IgnoreParseError, noIgnoreRules, parseIgnore, type IgnoreRules } from '../plan/ignore.js';
import { UsageError } from './errors.js';

/** --ignore-file FILE (must exist), else .kmsignore in the current folder when present. */
export async function loadIgnoreRules(file: string | undefined): Promise<IgnoreRules> {
  const target = file ?? IGNORE_FILE_NAME;
  let text: string;
  try {
    // The default file comes with the checkout (a pull request may commit it as a link to a host
    // file, whose lines a parse error would quote): read only inside the working directory, and
    // never more than a configuration file may be. A file named with --ignore-file is the operator's.
    if (!file) await refuseOutsideCwd(target);
    text = await readFile(target, 'utf8');
  } catch (e) {
    if (e instanceof UsageError) throw e;
    if (!file && (e as NodeJS.ErrnoException).code === 'ENOENT') return noIgnoreRules();
    throw new UsageError(`cannot read the ignore file ${target}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  try {
    return parseIgnore(text, target);
  } catch (e) {
    if (e instanceof IgnoreParseError) throw new UsageError(`ignore file is not valid:\n${e.message}`);
    throw e;
  }
}

async function refuseOutsideCwd(target: string): Promise<void> {
  const info = await lstat(target);
  if (info.isSymbolicLink()) {
    const real = await realpath(target);
    if (!isInside(real, await realpath(process.cwd()))) {
      throw new UsageError(`${target} resolves outside the working directory (through a symbolic link): ignore rules are read only inside it, and it is not read`);
    }
  }
  const size = (await stat(target)).size;
  const limit = configLimits().fileBytes;
  if (size > limit) throw new UsageError(`${target} is larger than the limit of ${formatSize(limit)} per configuration file (${formatSize(size)}): it is not read`);
}
