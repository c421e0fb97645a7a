// Wall-clock limits of the tests. A limit is there to end a test that hangs, never to time one:
// on a busy machine (CI's two cores running two test files, other work beside them, a CPU hog)
// every process a test starts is slower by about the number of runnable processes per core, so a
// limit is scaled by that factor when it is set. The factor is the one-minute load average per
// core (os.loadavg, so measured, not guessed), at least 1 and at most 8; KMS_SYNC_TEST_PATIENCE
// sets it instead (e.g. 4 on a machine known to be slow).
import { availableParallelism, loadavg } from 'node:os';

/** How many times longer than on a quiet machine things take now. */
export function patience(): number {
  const set = Number(process.env.KMS_SYNC_TEST_PATIENCE);
  if (Number.isFinite(set) && set > 0) return set;
  const perCore = (loadavg()[0] ?? 0) / Math.max(1, availableParallelism());
  return Math.min(8, Math.max(1, perCore));
}

/** `ms`, a limit chosen for a quiet machine, scaled to the machine's load now. */
export function patient(ms: number): number {
  return Math.round(ms * patience());
}

/** How waitFor asks a condition that costs a request. */
export interface WaitOptions {
  /**
   * A cheap sign that the condition may have changed (the length of a child's output, the size of a
   * file it appends to), read every 10 ms: the condition is asked when the sign moves, and at least
   * every `every` ms (default 200) when it does not. For a condition that costs a request (an
   * agent's /api/status: ~2 ms of CPU between the two processes, ~100 asks a second at 10 ms)
   * whose changes the process logs: asked as soon as they are logged, a few times a second otherwise.
   */
  wake: () => unknown;
  every?: number;
}

/**
 * Polls `cond` every 10 ms until it holds (true) or `ms` (a quiet machine's limit, scaled by
 * patient()) has passed (false). For what a test cannot be told of as an event. With `o.wake`,
 * `cond` is asked only when the sign moves or `o.every` ms have passed (WaitOptions), and once
 * more at the limit.
 */
export async function waitFor(cond: () => Promise<boolean> | boolean, ms: number, o?: WaitOptions): Promise<boolean> {
  const end = Date.now() + patient(ms);
  let sign: unknown = waitFor; // never a sign's value: the first round asks
  let asked = 0;
  while (Date.now() < end) {
    if (o) {
      const now = o.wake();
      if (now !== sign || Date.now() - asked >= (o.every ?? 200)) {
        sign = now;
        asked = Date.now();
        if (await cond()) return true;
      }
    } else if (await cond()) return true;
    await new Promise((r) => setTimeout(r, 10));
  }
  return o ? cond() : false;
}
