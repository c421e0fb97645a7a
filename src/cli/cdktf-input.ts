// The CDKTF flags of validate, plan, apply, drift, rotate and secrets list/flush (--cdktf [DIR], --cdktf-out DIR,
// --stack NAME), and the CDKTF form of export (--format cdktf|cdktn -o DIR).
import { existsSync } from 'node:fs';
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { Command } from 'commander';
import { desiredStateToCdktf, type CdktfFlavour } from '../cdktf/index.js';
import type { DesiredState } from '../model/index.js';
import { UsageError } from './errors.js';
// Read by the engine (engine/cdktf-input.ts); the flags are the CLI's.
export { readCdktfFlags, usesCdktf, type CdktfFlags } from '../engine/cdktf-input.js';

const collect = (v: string, prev: string[]) => [...prev, v];

export function addCdktfOptions(cmd: Command): Command {
  return cmd
    .option(
      '--cdktf [dir]',
      'read CDKTF stacks: run the app of DIR/cdktf.json (default: the current folder) and read its kms_* resources',
    )
    .option('--cdktf-out <dir>', 'read an existing CDKTF synth output (cdktf.out) instead of running the app')
    .option('--stack <name>', 'CDKTF stacks to read (repeatable; default: all)', collect, []);
}

/**
 * `export --format cdktf|cdktn -o DIR`: writes the project files into DIR, refusing to overwrite
 * any of them (nothing is written when one exists).
 */
export async function writeCdktfExport(
  dir: string,
  desired: DesiredState,
  flavour: CdktfFlavour,
  header: string[],
): Promise<string[]> {
  const files = desiredStateToCdktf(desired, { flavour, header });
  const target = path.resolve(dir);
  const existing = [...files.keys()].filter((f) => existsSync(path.join(target, f)));
  if (existing.length) throw new UsageError(`${dir} already has ${existing.join(', ')}; refusing to overwrite`);
  await mkdir(target, { recursive: true, mode: 0o755 });
  for (const [name, text] of files) await writeFile(path.join(target, name), text, { flag: 'wx', mode: 0o644 });
  return [...files.keys()];
}
