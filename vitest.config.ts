import { availableParallelism } from 'node:os';
import { configDefaults, defineConfig } from 'vitest/config';
import { patient } from './test/support/patience.js';
import { SlowFirstSequencer } from './test/support/sequencer.js';
import { SHARED_WORKER_FILES } from './test/support/shared-workers.js';

const CORES = availableParallelism();
// One test file more than there are cores (at least 2). The heaviest files keep a core busy while they
// run (terraform and its provider, npm, the crash campaigns), but many others wait a good part of
// their time on the processes they start, on timers and on fsync: with one file per core those waits
// left CPU idle, which one more file fills. Where every file is busy, the extra file only makes each
// one take longer, which the limits allow for (LIMIT, and patient() in the tests). `--maxWorkers=N`
// sets another number for one run.
const WORKERS = Math.max(2, CORES + 1);
const LIMIT = Math.round(patient(60_000) * Math.max(1, WORKERS / CORES));

export default defineConfig({
  test: {
    // One temporary folder per run (test/support/temp-root.ts).
    // The run fails when the tests left files there or in the shared temporary folder.
    // In CI (or with KMS_SYNC_TEST_CPU=1) the run ends with each file's CPU-seconds (test/support/cpu-report.ts).
    globalSetup: ['test/support/temp-root.ts', 'test/support/cpu-report.ts'],
    // Scratch folders (test/support/scratch.ts) go after each file's last test; each file's CPU
    // time is logged when the run reports it (test/support/cpu-log.ts).
    setupFiles: ['test/support/scratch-cleanup.ts', 'test/support/cpu-log.ts'],
    // Limits end hung tests; they never time a fast one: scaled to the machine's load (test/support/patience.ts)
    // and to the load the run's own files add beyond one per core (WORKERS, above).
    testTimeout: LIMIT,
    hookTimeout: LIMIT,
    pool: 'forks',
    maxWorkers: WORKERS,
    // The slowest files start first (test/support/sequencer.ts).
    sequence: { sequencer: SlowFirstSequencer },
    reporters: process.env.CI ? ['default'] : ['default'],
    // Short files that leave nothing behind run one after another in shared workers, the others
    // each in a fresh one (test/support/shared-workers.ts).
    projects: [
      { extends: true, test: { name: 'shared', include: SHARED_WORKER_FILES, isolate: false } },
      {
        extends: true,
        test: {
          name: 'isolated',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, ...SHARED_WORKER_FILES],
        },
      },
    ],
  },
});
