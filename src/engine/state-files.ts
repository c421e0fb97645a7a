// Small JSON records a run keeps across runs (the inventory beside the journal or in the agent's
// state folder, the agent's heal history and approved deletes): written atomically (temp file, fsync, rename: a kill leaves the old
// or the new content), read tolerantly (a missing or damaged file is "nothing recorded", said once).
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { DesiredState } from '../model/index.js';
import {
  InventoryIndex,
  nextInventory,
  parseInventory,
  type Inventory,
  type InventoryScan,
} from '../plan/inventory.js';
import type { Plan } from '../plan/types.js';
import { atomicWriteFile } from '../secrets/fsutil.js';

/** The parsed content of `file`, or undefined when it is absent; `damaged` is told when it is there but not what `parse` accepts. */
export async function readStateJson<T>(
  file: string,
  parse: (v: unknown) => T | undefined,
  damaged?: (why: string) => void,
): Promise<T | undefined> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT')
      damaged?.(`cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    return undefined;
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    damaged?.('is not JSON');
    return undefined;
  }
  const parsed = parse(value);
  if (parsed === undefined) damaged?.('is not in the expected form');
  return parsed;
}

export async function writeStateJson(file: string, value: unknown): Promise<void> {
  await atomicWriteFile(file, `${JSON.stringify(value)}\n`);
}

/** Where the CLI keeps a configuration's inventory: beside its journal (`.kms-sync/`). */
export const cliInventoryFile = (baseDir: string) => path.join(baseDir, '.kms-sync', 'inventory.json');

/**
 * The inventory kept in `file`, when it is this owner's (undefined: none, damaged, or another
 * owner id's, which `warn` is told: it is made again from the ownership markers).
 */
export async function readInventory(
  file: string,
  owner: string,
  warn: (line: string) => void,
): Promise<Inventory | undefined> {
  const kept = await readStateJson(file, parseInventory, (why) =>
    warn(`the inventory ${file} ${why}; it is made again from the ownership markers`),
  );
  if (kept && kept.owner !== owner) {
    warn(
      `the inventory ${file} belongs to owner '${kept.owner}', this configuration is '${owner}': it is made again from the ownership markers`,
    );
    return undefined;
  }
  return kept;
}

/**
 * The inventory after a run (plan/inventory.ts nextInventory), written to `file` when it changed.
 * `plan`: what still differs after the run (the operations it did not apply).
 */
export async function keepInventory(
  file: string,
  before: Inventory | undefined,
  scan: InventoryScan,
  desired: DesiredState,
  plan: Plan,
  owner: string,
  o: { now: Date; revision?: string },
): Promise<Inventory> {
  const next = nextInventory(before, scan, desired, plan, owner, o);
  if (
    before !== undefined &&
    before.owner === next.owner &&
    JSON.stringify(before.entries) === JSON.stringify(next.entries)
  )
    return before;
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  await writeStateJson(file, next);
  return next;
}

/**
 * The CLI's inventory of a configuration (beside its journal) and its index for planFor's
 * `inventory`: its digests only (drift tells pending from changed outside), never ownership, since
 * the file sits in the configuration's folder, which a pull request can write.
 */
export async function cliInventory(
  baseDir: string,
  owner: string,
  warn: (line: string) => void,
): Promise<{ file: string; before: Inventory | undefined; index: InventoryIndex }> {
  const file = cliInventoryFile(baseDir);
  const before = await readInventory(file, owner, warn);
  return { file, before, index: new InventoryIndex(before?.entries ?? [], { ownership: false }) };
}
