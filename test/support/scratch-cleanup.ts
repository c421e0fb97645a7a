// Vitest setup file (runs in each test file's worker): the file's scratch folders go after its last
// test, and the CLI output it collected (allOutput, checked by the file's own after-hooks) is
// dropped, so that the next file of a shared worker (test/support/shared-workers.ts) starts with
// none, as in a worker of its own.
import { afterAll } from 'vitest';
import { allOutput } from './cli.js';
import { removeScratch } from './scratch.js';

afterAll(() => {
  removeScratch();
  allOutput.length = 0;
});
