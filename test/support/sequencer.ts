// The order test files start in. Vitest starts the files that took longest in its last run first, but
// a clean clone (CI) has no last run and falls back to the biggest files first: the slowest files
// (an npm ci, terraform applies killed and re-run) then started near the end and the run waited on
// them alone (one CI run ended 70 s after the other worker went idle). SLOW_FIRST names them, slowest
// first; they start before every other file of their kind (own worker or shared, slowFirstOrder
// below), which keep vitest's own order. The figures are one
// clean-clone CI run's per-file durations (3 files on 2 cores): refresh them from the newest CI log
// (or a vitest JSON report) with `node scripts/slow-first.ts <log>`, which lists every file that took
// 8 s or more. test/architecture/sequencer.test.ts checks that every name is a test file.
import path from 'node:path';
import type { TestSpecification } from 'vitest/node';
import { BaseSequencer } from 'vitest/node';

/** Test files that take 8 s or more, slowest first (file: seconds in CI; node scripts/slow-first.ts writes it). */
export const SLOW_FIRST: Record<string, number> = {
  'test/cli/quick-start.test.ts': 120,
  'test/crash/terraform.test.ts': 113,
  'test/cdktf/deploy.test.ts': 85,
  'test/provider/kill.test.ts': 54,
  'test/cli/plan-streamed-config.test.ts': 49,
  'test/provider/adoption.test.ts': 46,
  'test/provider/identity.test.ts': 37,
  'test/provider/terraform.test.ts': 31,
  'test/provider/package.test.ts': 30,
  'test/cdktf/engine.test.ts': 29,
  'test/fuzz/config-fuzz.test.ts': 27,
  'test/cli/ci-local-store.test.ts': 27,
  'test/agent/inventory.test.ts': 27,
  'test/sync/ownership.test.ts': 26,
  'test/crash/scenarios.test.ts': 24,
  'test/engine/stream-apply.test.ts': 23,
  'test/secrets/crash-journal.test.ts': 22,
  'test/bench/bench-quick.test.ts': 22,
  'test/crash/agent.test.ts': 20,
  'test/crash/crash.test.ts': 20,
  'test/sync/key-safety.test.ts': 19,
  'test/secrets/crash-store.test.ts': 19,
  'test/agent/forged-writes.test.ts': 19,
  'test/cli/interrupt-pty.test.ts': 18,
  'test/provider/two-owners.test.ts': 17,
  'test/agent/pid1.test.ts': 17,
  'test/cli/single-executable.test.ts': 17,
  'test/cli/security-policy.test.ts': 16,
  'test/cdktf/bindings.test.ts': 16,
  'test/provider/cdktf-terraform.test.ts': 15,
  'test/agent/operator-cli.test.ts': 15,
  'test/config/files-inside-root.test.ts': 15,
  'test/cli/habits.test.ts': 15,
  'test/engine/plan-threads.test.ts': 14,
  'test/agent/agent.test.ts': 14,
  'test/agent/prune.test.ts': 13,
  'test/provider/ephemeral-terraform.test.ts': 13,
  'test/agent/hostile-config.test.ts': 13,
  'test/sync/pending-revokes.test.ts': 13,
  'test/sync/engine.test.ts': 12,
  'test/sync/write-failures.test.ts': 12,
  'test/engine/stream.test.ts': 12,
  'test/cli/hostile-text.test.ts': 11,
  'test/agent/notify.test.ts': 11,
  'test/engine/shard.test.ts': 11,
  'test/agent/verify-commits.test.ts': 11,
  'test/drift/cli-inventory.test.ts': 10,
  'test/provider/install.test.ts': 10,
  'test/agent/hostile-input.test.ts': 9,
  'test/docs/examples.test.ts': 9,
  'test/report/markdown.test.ts': 8,
  'test/docs/help-and-errors.test.ts': 8,
  'test/cli/security-stores.test.ts': 8,
};

/** Where `file` (a path relative to the repository) stands in SLOW_FIRST, or -1. */
export function slowRank(file: string): number {
  return Object.keys(SLOW_FIRST).indexOf(file.replaceAll('\\', '/'));
}

/**
 * The order files start in: every file with a worker of its own before every file of the shared
 * workers (test/support/shared-workers.ts), and in each of the two the SLOW_FIRST files first,
 * slowest first, then vitest's order. Vitest's pool keeps a shared worker for the next file only
 * when the file at the head of its queue is a shared one, and stops it otherwise: with the shared
 * files of SLOW_FIRST among the others, about 4 shared workers were stopped and started again per
 * run (~0.35 CPU-s each); in two blocks, the three shared workers start once, at the change. The
 * shared files take at most ~15 s each, so the run still ends on short files.
 */
export function slowFirstOrder<T>(files: T[], name: (file: T) => string, isShared: (file: T) => boolean): T[] {
  const rank = (file: T): number => {
    const r = slowRank(name(file));
    return r < 0 ? Number.MAX_SAFE_INTEGER : r;
  };
  // Array.prototype.sort is stable: files outside the list keep vitest's order.
  return [...files].sort((a, b) => Number(isShared(a)) - Number(isShared(b)) || rank(a) - rank(b));
}

export class SlowFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    return slowFirstOrder(
      await super.sort(files),
      (spec) => path.relative(spec.project.config.root, spec.moduleId),
      (spec) => spec.project.config.isolate === false,
    );
  }
}
