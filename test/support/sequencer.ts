// The order test files start in. Vitest starts the files that took longest in its last run first, but
// a clean clone (CI) has no last run and falls back to the biggest files first: the slowest files
// (an npm ci, terraform applies killed and re-run) then started near the end and the run waited on
// them alone (one CI run ended 70 s after the other worker went idle). SLOW_FIRST names them, slowest
// first (seconds measured on a quiet 2-core machine); they start before every other file, which keep
// vitest's own order. test/architecture/sequencer.test.ts checks that every name is a test file.
import path from 'node:path';
import type { TestSpecification } from 'vitest/node';
import { BaseSequencer } from 'vitest/node';

/** Test files that take 15 s or more, slowest first (file: seconds, from a CI run's timings). */
export const SLOW_FIRST: Record<string, number> = {
  'test/cli/quick-start.test.ts': 94,
  'test/cdktf/deploy.test.ts': 83,
  'test/crash/terraform.test.ts': 70,
  'test/provider/kill.test.ts': 54,
  'test/provider/identity.test.ts': 48,
  'test/provider/package.test.ts': 35,
  'test/provider/adoption.test.ts': 32,
  'test/provider/terraform.test.ts': 32,
  'test/cli/habits.test.ts': 30,
  'test/cli/plan-streamed-config.test.ts': 27,
  'test/sync/ownership.test.ts': 25,
  'test/agent/inventory.test.ts': 24,
  'test/cdktf/engine.test.ts': 24,
  'test/sync/key-safety.test.ts': 24,
  'test/cli/security-policy.test.ts': 24,
  'test/cli/ci-local-store.test.ts': 23,
  'test/crash/scenarios.test.ts': 23,
  'test/provider/two-owners.test.ts': 22,
  'test/secrets/crash-journal.test.ts': 22,
  'test/fuzz/config-fuzz.test.ts': 21,
  'test/provider/cdktf-terraform.test.ts': 21,
  'test/crash/crash.test.ts': 20,
  'test/engine/stream-apply.test.ts': 20,
  'test/engine/shard.test.ts': 19,
  'test/provider/ephemeral-terraform.test.ts': 19,
  'test/docs/help-and-errors.test.ts': 18,
  'test/bench/bench-quick.test.ts': 17,
  'test/config/files-inside-root.test.ts': 16,
  'test/agent/forged-writes.test.ts': 15,
};

/** Where `file` (a path relative to the repository) stands in SLOW_FIRST, or -1. */
export function slowRank(file: string): number {
  return Object.keys(SLOW_FIRST).indexOf(file.replaceAll('\\', '/'));
}

export class SlowFirstSequencer extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const rest = await super.sort(files);
    const rank = (spec: TestSpecification): number => {
      const r = slowRank(path.relative(spec.project.config.root, spec.moduleId));
      return r < 0 ? Number.MAX_SAFE_INTEGER : r;
    };
    // Array.prototype.sort is stable: files outside the list keep vitest's order.
    return [...rest].sort((a, b) => rank(a) - rank(b));
  }
}
