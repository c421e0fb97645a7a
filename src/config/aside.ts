// A read aside: the YAML of a large environment's clients and endpoints read on a worker thread
// (config/chunk-worker.ts) while the main thread checks and builds the configuration and its live
// read proceeds. A plan of one environment of 100,000 clients spent ~0.4 s of its main thread in
// the fast reader; JSON.parse of the same chunks costs less than half of that. The main thread
// still checks and builds every chunk (load.ts buildDeferred); whatever the worker does not send
// (it stopped, it failed, it never started) the main thread reads itself, as without it, so the
// model, its places and every message are those of a load on one thread.
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Worker } from 'node:worker_threads';

/**
 * A deferred block's text (from the start of its first line) and its nesting depth; with the
 * skeleton read's lines of it (their offsets still the file's: `offset` is the text's start in
 * it), so that the worker does not scan them again.
 */
export interface AsideBlock {
  text: string;
  depth: number;
  lines?: { starts: Int32Array; ends: Int32Array; indents: Int32Array; offset: number };
}

/** From the worker: a chunk of block `b` as JSON text; the block read to its end; or the block left to the main thread from here on. */
export type AsideMessage = { b: number; json: string } | { b: number; end: true } | { b: number; stop: true };

/**
 * Deferred blocks this large in all (characters, ~18,000 clients) are read aside (LoadOptions.readAside):
 * below, a worker's start costs more than it saves.
 */
export const ASIDE_FROM = 4_000_000;

/** Chunks handed out from workers, for the tests (which check that the worker read what they compare). */
export const asideRead = { chunks: 0 };

/** The worker's module beside this one (dist/config/ or the bundle's dist/bin/); none when run from the sources. */
function workerEntry(): URL | undefined {
  const url = new URL('./chunk-worker.js', import.meta.url);
  return url.protocol === 'file:' && existsSync(fileURLToPath(url)) ? url : undefined;
}

interface BlockState {
  chunks: string[];
  /** Chunks handed out so far. */
  taken: number;
  state: 'open' | 'end' | 'stop';
}

export class AsideChunks {
  private readonly worker: Worker;
  private readonly blocks: BlockState[];
  private wake: (() => void) | undefined;

  private constructor(worker: Worker, count: number) {
    this.worker = worker;
    this.blocks = Array.from({ length: count }, () => ({ chunks: [], taken: 0, state: 'open' as const }));
    worker.on('message', (m: AsideMessage) => {
      const block = this.blocks[m.b];
      if (block?.state !== 'open') return;
      if ('json' in m) block.chunks.push(m.json);
      else block.state = 'end' in m ? 'end' : 'stop';
      this.woken();
    });
    // A worker that fails or ends early leaves what it did not send to the main thread.
    const gone = () => {
      for (const block of this.blocks) if (block.state === 'open') block.state = 'stop';
      this.woken();
    };
    worker.on('error', gone);
    worker.on('exit', gone);
    worker.unref();
  }

  /** A worker reading `blocks` `size` items at a time; none when there is no worker module (run from the sources). */
  static start(blocks: AsideBlock[], size: number): AsideChunks | undefined {
    const entry = workerEntry();
    if (!entry) return undefined;
    // Loaded here, not at start-up: most runs start no thread.
    const { Worker } = process.getBuiltinModule('node:worker_threads') as typeof import('node:worker_threads');
    try {
      // The lines' buffers are moved to the worker, not copied (they are the blocks' own copies).
      const transferList = blocks.flatMap((b) =>
        b.lines ? [b.lines.starts, b.lines.ends, b.lines.indents].map((column) => column.buffer as ArrayBuffer) : [],
      );
      const worker = new Worker(entry, { workerData: { blocks, size }, transferList, stdout: true, stderr: true });
      return new AsideChunks(worker, blocks.length);
    } catch {
      return undefined;
    }
  }

  private woken(): void {
    const wake = this.wake;
    if (!wake) return;
    this.wake = undefined;
    this.worker.unref();
    wake();
  }

  /**
   * The next chunk of block `b` (its items), `'end'` when the block is read, `'stop'` when the
   * main thread reads the rest of it itself (from chunk `taken(b)` on), or a promise to wait on.
   */
  next(b: number): unknown[] | 'end' | 'stop' | Promise<void> {
    const block = this.blocks[b]!;
    if (block.taken < block.chunks.length) {
      const json = block.chunks[block.taken]!;
      block.chunks[block.taken++] = '';
      asideRead.chunks++;
      return JSON.parse(json) as unknown[];
    }
    if (block.state !== 'open') return block.state;
    // Kept alive only while waited on: an unreferenced worker's messages do not hold the process.
    this.worker.ref();
    return new Promise<void>((resolve) => {
      this.wake = resolve;
    });
  }

  /** Chunks of block `b` handed out. */
  taken(b: number): number {
    return this.blocks[b]!.taken;
  }

  /** Ends the worker (the load is done, or gave way). */
  close(): void {
    void this.worker.terminate();
  }
}
