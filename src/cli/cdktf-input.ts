// The CDKTF flags of validate, plan, apply, drift, rotate and secrets list/flush (--cdktf [DIR], --cdktf-out DIR,
// --stack NAME), and the CDKTF form of export (--format cdktf|cdktn -o DIR).
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import { CdktfError, desiredStateToCdktf, loadCdktf, type CdktfFlavour, type CdktfInput } from '../cdktf/index.js';
import type { DesiredState } from '../model/index.js';
import { printable } from '../model/printable.js';
import { UsageError } from './errors.js';
import { configLimits, type ConfigLimits } from '../config/limits.js';
import { err } from './output.js';
import { clearReadProgress } from './read-progress.js';

export interface CdktfFlags {
  /** `--cdktf` alone is true: the current folder holds cdktf.json. */
  cdktf?: string | boolean;
  cdktfOut?: string;
  stack?: string[];
}

const collect = (v: string, prev: string[]) => [...prev, v];

export function addCdktfOptions(cmd: Command): Command {
  return cmd
    .option('--cdktf [dir]', 'read CDKTF stacks: run the app of DIR/cdktf.json (default: the current folder) and read its kms_* resources')
    .option('--cdktf-out <dir>', 'read an existing CDKTF synth output (cdktf.out) instead of running the app')
    .option('--stack <name>', 'CDKTF stacks to read (repeatable; default: all)', collect, []);
}

export function usesCdktf(o: CdktfFlags): boolean {
  return (o.cdktf !== undefined && o.cdktf !== false) || o.cdktfOut !== undefined;
}

/** Synthesizes (or reads) the CDKTF stacks the flags name; undefined when none are named. */
export async function readCdktfFlags(o: CdktfFlags, limits: ConfigLimits = configLimits()): Promise<CdktfInput | undefined> {
  if (!usesCdktf(o)) {
    if (o.stack?.length) throw new UsageError('--stack needs --cdktf [DIR] or --cdktf-out DIR');
    return undefined;
  }
  let input: CdktfInput;
  try {
    input = await loadCdktf({
      ...(typeof o.cdktf === 'string' ? { dir: o.cdktf } : o.cdktf === true ? { dir: '.' } : {}),
      ...(o.cdktfOut !== undefined ? { outDir: o.cdktfOut } : {}),
      stacks: o.stack ?? [],
      maxBytes: limits.totalBytes,
    });
  } catch (e) {
    if (e instanceof CdktfError) throw new UsageError(e.message);
    throw e;
  }
  showAppStderr(input.appStderr);
  return input;
}

/**
 * The app's warnings reach the user as cdktf synth shows them, also when the synth succeeds: each
 * line prefixed (so it is not taken for kms-sync's own) and escaped (the app is code from the
 * configuration's repository: no escape sequences or workflow commands reach the terminal or log).
 */
function showAppStderr(text: string): void {
  const lines = text.split(/\r?\n/).filter((l) => l.trim() !== '');
  if (!lines.length) return;
  clearReadProgress();
  for (const line of lines) err(`cdktf app: ${printable(line.replace(/\x1b\[[0-9;]*m/g, ''))}\n`); // colours dropped, the rest escaped
}

/**
 * `export --format cdktf|cdktn -o DIR`: writes the project files into DIR, refusing to overwrite
 * any of them (nothing is written when one exists).
 */
export async function writeCdktfExport(dir: string, desired: DesiredState, flavour: CdktfFlavour, header: string[]): Promise<string[]> {
  const files = desiredStateToCdktf(desired, { flavour, header });
  const target = path.resolve(dir);
  const existing = [...files.keys()].filter((f) => existsSync(path.join(target, f)));
  if (existing.length) throw new UsageError(`${dir} already has ${existing.join(', ')}; refusing to overwrite`);
  await mkdir(target, { recursive: true, mode: 0o755 });
  for (const [name, text] of files) await writeFile(path.join(target, name), text, { flag: 'wx', mode: 0o644 });
  return [...files.keys()];
}
