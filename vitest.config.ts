import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // One temporary folder per run, removed at its end (test/support/temp-root.ts).
    globalSetup: ['test/support/temp-root.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Two cores: files run in parallel workers, each test file starts its own emulator on port 0.
    pool: 'forks',
    reporters: process.env.CI ? ['default'] : ['default'],
  },
});
