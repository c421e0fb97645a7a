// The ignore file of a run (.kmsignore beside the configuration, or --ignore-file): resources it
// names are never deleted (plan/ignore.ts), for every front end.
import { existsSync } from 'node:fs';
import { lstat, readFile, realpath, stat } from 'node:fs/promises';
import path from 'node:path';
import { configLimits, formatSize } from '../config/limits.js';
import { isInside } from '../config/paths.js';
import { IGNORE_FILE_NAME, IgnoreParseError, noIgnoreRules, parseIgnore, type IgnoreRules } from '../plan/ignore.js';
import { UsageError } from './errors.js';
import { frontEnd } from './front-end.js';

/**
 * Where the default ignore file is: in the configuration's folder (wherever the command runs
 * from, like kms-sync.yaml's own .kms-sync/); an older habit, the current folder's, is still read
 * when the configuration's folder has none, with a warning to move it.
 */
export function defaultIgnoreFile(configDir: string | undefined): string {
  const beside = ignoreFileBeside(configDir);
  if (!configDir || existsSync(beside) || path.resolve(configDir) === process.cwd() || !existsSync(IGNORE_FILE_NAME))
    return beside;
  frontEnd().notice(
    `warning: ${IGNORE_FILE_NAME} read from the current folder; kms-sync reads it beside the configuration: move it to ${beside}\n`,
  );
  return IGNORE_FILE_NAME;
}

/** The ignore file in a configuration's folder, as shown (relative to the current folder when inside it). */
export function ignoreFileBeside(configDir: string | undefined): string {
  const file = path.resolve(configDir ?? '.', IGNORE_FILE_NAME);
  const rel = path.relative(process.cwd(), file);
  return rel.startsWith('..') || path.isAbsolute(rel) ? file : rel;
}

/** --ignore-file FILE (must exist), else the default ignore file (defaultIgnoreFile) when present. */
export async function loadIgnoreRules(file: string | undefined, configDir?: string): Promise<IgnoreRules> {
  const target = file ?? defaultIgnoreFile(configDir);
  let text: string;
  try {
    // The default file comes with the checkout (a pull request may commit it as a link to a host
    // file, whose lines a parse error would quote): read only inside its folder, and never more
    // than a configuration file may be. A file named with --ignore-file is the operator's.
    if (!file) await refuseOutsideFolder(target);
    text = await readFile(target, 'utf8');
  } catch (e) {
    if (e instanceof UsageError) throw e;
    if (!file && (e as NodeJS.ErrnoException).code === 'ENOENT') return noIgnoreRules();
    throw new UsageError(
      `cannot read the ignore file ${target}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
    );
  }
  try {
    return parseIgnore(text, target);
  } catch (e) {
    if (e instanceof IgnoreParseError) throw new UsageError(`ignore file is not valid:\n${e.message}`);
    throw e;
  }
}

async function refuseOutsideFolder(target: string): Promise<void> {
  const info = await lstat(target);
  if (info.isSymbolicLink()) {
    const real = await realpath(target);
    if (!isInside(real, await realpath(path.dirname(path.resolve(target))))) {
      throw new UsageError(
        `${target} resolves outside its folder (through a symbolic link): ignore rules are read only inside it, and it is not read`,
      );
    }
  }
  const size = (await stat(target)).size;
  const limit = configLimits().fileBytes;
  if (size > limit)
    throw new UsageError(
      `${target} is larger than the limit of ${formatSize(limit)} per configuration file (${formatSize(size)}): it is not read`,
    );
}
