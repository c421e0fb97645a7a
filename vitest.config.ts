import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // One temporary folder per run (test/support/temp-root.ts).
    // The run fails when the tests left files there or in the shared temporary folder.
    globalSetup: ['test/support/temp-root.ts'],
    // Scratch folders (test/support/scratch.ts) go after each file's last test.
    setupFiles: ['test/support/scratch-cleanup.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Two cores: files run in parallel workers, each test file starts its own emulator on port 0.
    pool: 'forks',
    reporters: process.env.CI ? ['default'] : ['default'],
  },
});
