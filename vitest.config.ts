import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';
import { patient } from './test/support/patience.js';
import { SlowFirstSequencer } from './test/support/sequencer.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // One temporary folder per run (test/support/temp-root.ts).
    // The run fails when the tests left files there or in the shared temporary folder.
    globalSetup: ['test/support/temp-root.ts'],
    // Scratch folders (test/support/scratch.ts) go after each file's last test.
    setupFiles: ['test/support/scratch-cleanup.ts'],
    // Limits end hung tests; they never time a fast one: scaled to the machine's load (test/support/patience.ts).
    testTimeout: patient(60_000),
    hookTimeout: patient(60_000),
    pool: 'forks',
    // At least two test files at a time. Vitest's default is one fewer worker than cores, which on CI's two
    // cores ran the files one by one; a test file mostly waits on the processes it starts
    // (the CLI, terraform, the agent, git), so two at once keep both cores busy.
    maxWorkers: Math.max(2, availableParallelism() - 1),
    // The slowest files start first (test/support/sequencer.ts).
    sequence: { sequencer: SlowFirstSequencer },
    reporters: process.env.CI ? ['default'] : ['default'],
  },
});
