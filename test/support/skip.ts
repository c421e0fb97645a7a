// Loud skips: a test that cannot run here (a tool is missing, an account is not configured) says so
// on a line of its own starting `SKIPPED: `, so a skip never passes for a pass. Every skip in test/
// goes through these (test/architecture/skips.test.ts checks it).
import type { TestContext } from 'vitest';

/** Prints `SKIPPED: <why>` when `skip` is true, and returns `skip`: `it.skipIf(skipWhen(!tool, 'why'))`. */
export function skipWhen(skip: boolean, why: string): boolean {
  if (skip) process.stderr.write(`SKIPPED: ${why}\n`);
  return skip;
}

/** Inside a running test: prints `SKIPPED: <why>` and skips the rest of it. */
export function skipTest(ctx: Pick<TestContext, 'skip'>, why: string): never {
  process.stderr.write(`SKIPPED: ${why}\n`);
  return ctx.skip() as never;
}
