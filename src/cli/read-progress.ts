// While a plan reads the live state: "Reading live state… 37/112 pages" on one terminal line, so a
// read of 100,000 clients does not look like a hang. Only on a terminal (logs and CI get nothing:
// a line per page would drown them). The total grows as each list's first page tells its count.
import type { KmsClient } from '../api/client.js';
import { err, isCi } from './output.js';

/** Whether progress lines are drawn: stderr is a terminal and this is not a CI job. */
export function interactiveStderr(env: NodeJS.ProcessEnv = process.env): boolean {
  return Boolean(process.stderr.isTTY) && !isCi(env);
}

/** The progress line on the terminal now, if any: cleared before other output (clearReadProgress). */
let shown: { clear: () => void } | undefined;

/**
 * Clears the progress line before something else is written to stderr (a read started ahead of
 * the configuration's warnings); the next page read draws it again.
 */
export function clearReadProgress(): void {
  shown?.clear();
}

/** Draws page progress while `read` runs, then clears the line. */
export async function withReadProgress<T>(
  api: KmsClient,
  read: () => Promise<T>,
  env: NodeJS.ProcessEnv = process.env,
  signal?: AbortSignal,
): Promise<T> {
  // Pages a read started ahead (ReadAhead) took before now count too: the line starts from them.
  const ahead = api.pagesAhead;
  api.pagesAhead = undefined;
  if (!interactiveStderr(env)) return read();
  const lists = new Map<string, number>();
  let done = ahead?.done ?? 0;
  let drawnAt = 0;
  let drawn = false;
  const clear = () => {
    if (drawn) err('\r\x1b[2K');
    drawn = false;
  };
  const draw = () => {
    let total = 0;
    for (const pages of lists.values()) total += pages;
    err(`\r\x1b[2KReading live state… ${done}/${total} pages`);
    drawn = true;
    shown = { clear };
  };
  let list = 0;
  for (const pages of ahead?.lists ?? []) lists.set(`ahead#${list++}`, pages);
  if (done > 0) draw();
  const previous = api.onPageRead;
  // A read started ahead of a configuration that turns out invalid: the line goes before the errors.
  const stop = () => {
    api.onPageRead = previous;
    clear();
  };
  signal?.addEventListener('abort', stop, { once: true });
  api.onPageRead = (e) => {
    previous?.(e);
    // Page 1 of a list announces the list; its page count joins the total.
    const announced = e.page === 1;
    if (announced) lists.set(`${e.kind}#${list++}`, e.pages);
    done++;
    // At most ten redraws a second (a fast read must not spend its time on the terminal), but a
    // grown total is always drawn: a few lines per environment, and the line never shows a stale total.
    const now = Date.now();
    if (announced || now - drawnAt >= 100) {
      drawnAt = now;
      draw();
    }
  };
  try {
    return await read();
  } finally {
    signal?.removeEventListener('abort', stop);
    api.onPageRead = previous;
    clear();
    shown = undefined;
  }
}
