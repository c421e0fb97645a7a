// Scratch folders of a test file: made in the run's temporary folder and removed after the file's
// last test (test/support/scratch-cleanup.ts, a vitest setup file), so a test that forgets its
// cleanup does not leave them behind. What a test or a process it starts makes elsewhere in the
// temporary folder is still caught by the run's check (test/support/temp-root.ts).
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const made = new Set<string>();

/** A new empty folder in the temporary folder, removed after the test file. */
export function scratchDir(prefix = 'kms-sync-test-'): string {
  const dir = mkdtempSync(path.join(tmpdir(), prefix));
  made.add(dir);
  return dir;
}

/** Removes `p` (a file or folder the caller made in the temporary folder) after the test file. */
export function removeLater(p: string): string {
  made.add(p);
  return p;
}

/** Removes every scratch folder made so far (the setup file calls it after each test file). */
export function removeScratch(): void {
  for (const dir of made) rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  made.clear();
}
