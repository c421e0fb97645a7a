import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import { patient } from './test/support/patience.js';
import { SlowFirstSequencer } from './test/support/sequencer.js';

const CORES = availableParallelism();
// One test file more than there are cores (at least 2). A test file keeps about three quarters of a
// core busy: the rest of its time it waits on the processes it starts (the CLI, terraform and its
// provider, the agent, git, npm), on timers and on fsync. With one file per core, CI's two cores
// stayed partly idle (117 files that took 866 s of file time there used about 620 s of CPU in
// another run); one more file fills them. `--maxWorkers=N` sets another number for one run.
const WORKERS = Math.max(2, CORES + 1);
const LIMIT = Math.round(patient(60_000) * Math.max(1, WORKERS / CORES));

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // One temporary folder per run (test/support/temp-root.ts).
    // The run fails when the tests left files there or in the shared temporary folder.
    globalSetup: ['test/support/temp-root.ts'],
    // Scratch folders (test/support/scratch.ts) go after each file's last test.
    setupFiles: ['test/support/scratch-cleanup.ts'],
    // Limits end hung tests; they never time a fast one: scaled to the machine's load (test/support/patience.ts)
    // and to the load the run's own files add beyond one per core (WORKERS, above).
    testTimeout: LIMIT,
    hookTimeout: LIMIT,
    pool: 'forks',
    maxWorkers: WORKERS,
    // The slowest files start first (test/support/sequencer.ts).
    sequence: { sequencer: SlowFirstSequencer },
    reporters: process.env.CI ? ['default'] : ['default'],
  },
});
