// Vitest global setup: every temporary file of a test run goes under one folder of its own (TMPDIR
// for the workers and every process they start that inherits it). At the end of the run the
// teardown checks that the tests removed what they made, and fails the run when they did not:
//  1. the run's own folder must be empty (except caches that tools the tests start keep there,
//     RUN_FOLDER_CACHES): whatever is left is listed, then the folder is removed anyway;
//  2. the machine's shared temporary folder (TMPDIR before the run changed it) must not have gained
//     entries of ours: a name is compared before and after the run and counts only when it is new,
//     still there at the end, and matches OURS (our own prefixes and what the tools we start make
//     when a child process is given an environment without our TMPDIR). Other processes on the
//     machine write there too; names outside OURS are never counted, and other runs' own folders
//     (kms-sync-vitest-*) are theirs to check. Someone's `npm run crash` beside the run makes names
//     of ours too, so this part fails the run only in CI (or with KMS_SYNC_TEMP_CHECK=strict) and
//     is a warning elsewhere.
// A globalSetup teardown that throws makes `vitest run` exit 1 (test/architecture/temp-check.test.ts).
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { leftovers, newSharedEntries } from './temp-check.js';

export default function setup(): () => void {
  const shared = tmpdir();
  const before = new Set(safeList(shared));
  const root = mkdtempSync(path.join(shared, 'kms-sync-vitest-'));
  process.env.TMPDIR = root;
  // `npm test` starts vitest with Node's compile cache off (vitest turns it on in the shared
  // temporary folder); the tests and the processes they start get the environment as a user has it.
  delete process.env.NODE_DISABLE_COMPILE_CACHE;
  return () => {
    const left = leftovers(safeList(root));
    rmSync(root, { recursive: true, force: true });
    const gained = newSharedEntries(before, safeList(shared), path.basename(root));
    const problems: string[] = [];
    if (left.length > 0)
      problems.push(
        `the tests left ${left.length} entr${left.length === 1 ? 'y' : 'ies'} in the run's temporary folder ${root} (now removed):\n${show(left)}`,
      );
    if (gained.length > 0) {
      const what = `the shared temporary folder ${shared} gained ${gained.length} entr${gained.length === 1 ? 'y' : 'ies'} of ours during the run (left in place; a process started without the run's TMPDIR made them, or another process on this machine):\n${show(gained)}`;
      // Only CI's machine runs nothing else; on a shared machine it is a warning (KMS_SYNC_TEMP_CHECK=strict fails there too).
      if (strictShared()) problems.push(what);
      else process.stderr.write(`warning: ${what}\n`);
    }
    if (problems.length > 0)
      throw new Error(`temporary-folder check failed (test/support/temp-root.ts): ${problems.join('\n')}`);
  };
}

function strictShared(): boolean {
  const ci = (process.env.CI ?? '').toLowerCase();
  return process.env.KMS_SYNC_TEMP_CHECK === 'strict' || (ci !== '' && ci !== '0' && ci !== 'false');
}

function safeList(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch {
    return [];
  }
}

function show(names: string[]): string {
  const max = 20;
  const lines = names.slice(0, max).map((n) => `  ${JSON.stringify(n)}`);
  if (names.length > max) lines.push(`  … and ${names.length - max} more`);
  return lines.join('\n');
}
