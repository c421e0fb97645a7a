// The worker thread of a read aside (config/aside.ts): it reads the deferred blocks it is given
// (the clients and endpoints of a large environment) with the fast reader, chunk by chunk, as the
// main thread would (fast-yaml.ts fastParseBlockChunks), and sends each chunk as JSON text, which
// the main thread parses at a fraction of the YAML's cost while its live read proceeds. A chunk
// that JSON would not carry exactly (a number that is not finite, or -0), one with `${` to
// interpolate (the main thread's variables and policy), or a block outside the fast subset
// ends that block here with `stop`: the main thread reads it itself from that chunk on, as before.
import { parentPort, workerData } from 'node:worker_threads';
import { type DeferredBlock, fastParseBlockChunks, type LineTable } from './fast-yaml.js';
import type { AsideBlock, AsideMessage } from './aside.js';

const { blocks, size } = workerData as { blocks: AsideBlock[]; size: number };
const port = parentPort!;
const send = (m: AsideMessage) => port.postMessage(m);

/** Whether JSON gives `value` back as it is: every number finite and not -0 (strings, booleans, null, lists and mappings always). */
function jsonExact(value: unknown, depth = 0): boolean {
  if (typeof value === 'number') return Number.isFinite(value) && !Object.is(value, -0);
  if (value === null || typeof value !== 'object') return true;
  if (depth > 200) return false;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) if (!jsonExact(value[i], depth + 1)) return false;
    return true;
  }
  for (const k in value) if (!jsonExact((value as Record<string, unknown>)[k], depth + 1)) return false;
  return true;
}

for (let b = 0; b < blocks.length; b++) {
  const { text, depth, lines } = blocks[b]!;
  // The skeleton read's lines of the block, made the text's (its offsets were the file's).
  let table: LineTable | undefined;
  if (lines) {
    const { starts, ends, indents, offset } = lines;
    for (let i = 0; i < starts.length; i++) {
      starts[i]! -= offset;
      ends[i]! -= offset;
    }
    table = { starts, ends, indents, count: starts.length };
  }
  const block: DeferredBlock = {
    container: {},
    key: 'clients',
    project: 0,
    environment: 0,
    start: 0,
    end: text.length,
    firstLine: 0,
    endLine: table?.count ?? 0,
    depth,
  };
  try {
    let ended = true;
    for (const { items, sites } of fastParseBlockChunks(text, block, size, table)) {
      if (sites.length > 0 || !jsonExact(items)) {
        ended = false;
        break;
      }
      send({ b, json: JSON.stringify(items) });
    }
    send(ended ? { b, end: true } : { b, stop: true });
  } catch {
    send({ b, stop: true });
  }
}
