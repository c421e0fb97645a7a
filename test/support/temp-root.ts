// Vitest global setup: every temporary file of a test run goes under one folder of its own (TMPDIR
// for the workers and every process they start that inherits it), removed when the run ends, so
// a run leaves nothing behind in the machine's temporary folder, whichever test forgot to clean up.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

export default function setup(): () => void {
  const root = mkdtempSync(path.join(tmpdir(), 'kms-sync-vitest-'));
  process.env.TMPDIR = root;
  // `npm test` starts vitest with Node's compile cache off (vitest turns it on in the shared
  // temporary folder); the tests and the processes they start get the environment as a user has it.
  delete process.env.NODE_DISABLE_COMPILE_CACHE;
  return () => rmSync(root, { recursive: true, force: true });
}
