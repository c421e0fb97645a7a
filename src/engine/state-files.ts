// Small JSON records a run keeps across runs (the inventory beside the journal or in the agent's
// state folder: engine/inventory.ts; the agent's heal history and approved deletes): written atomically (temp file, fsync, rename: a kill leaves the old
// or the new content), read tolerantly (a missing or damaged file is "nothing recorded", said once).
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { atomicWriteFile } from '../secrets/fsutil.js';

/** The parsed content of `file`, or undefined when it is absent; `damaged` is told when it is there but not what `parse` accepts. */
export async function readStateJson<T>(
  file: string,
  parse: (v: unknown) => T | undefined,
  damaged?: (why: string) => void,
): Promise<T | undefined> {
  return (await readStateJsonKnown(file, parse, damaged)).value;
}

/** A state file's parsed content with the sha256 of its bytes (none when it is absent). */
export interface StateJsonRead<T> {
  value: T | undefined;
  digest?: string;
  /** The text parsed (only when asked for: `withText`). */
  text?: string;
}

/**
 * readStateJson, with the digest of the text read: a text whose digest is `known`'s (read before
 * in this run, and unchanged since) is not parsed again: `known` is returned, and `damaged` is
 * not told again.
 */
export async function readStateJsonKnown<T>(
  file: string,
  parse: (v: unknown) => T | undefined,
  damaged?: (why: string) => void,
  known?: StateJsonRead<T>,
  withText = false,
): Promise<StateJsonRead<T>> {
  let bytes: Buffer;
  try {
    bytes = await readFile(file);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT')
      damaged?.(`cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    return { value: undefined };
  }
  // Of the bytes: a text read before is known without decoding it again.
  const digest = createHash('sha256').update(bytes).digest('hex');
  if (known?.digest === digest) return known;
  const text = bytes.toString('utf8');
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    damaged?.('is not JSON');
    return { value: undefined, digest };
  }
  const parsed = parse(value);
  if (parsed === undefined) damaged?.('is not in the expected form');
  return { value: parsed, digest, ...(withText ? { text } : {}) };
}

export async function writeStateJson(file: string, value: unknown): Promise<void> {
  await writeStateText(file, `${JSON.stringify(value)}\n`);
}

/** A state file's JSON text, written as writeStateJson writes (atomically). */
export async function writeStateText(file: string, text: string): Promise<void> {
  await atomicWriteFile(file, text);
}
