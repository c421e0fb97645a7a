// The rules of the temporary-folder check (test/support/temp-root.ts), apart so they can be tested.

/**
 * Caches that tools the tests start keep in the run's folder and that are not a test's own files:
 * Node's compile cache (npm and vitest turn it on for the processes they start).
 */
export const RUN_FOLDER_CACHES = new Set(['node-compile-cache']);

/**
 * Names in the shared temporary folder that are ours: our own prefix (kms-*: every kms-sync-*
 * folder of the tests, the bench and the CLI), and what the tools our tests start make there when
 * a child is started without the run's TMPDIR: Node's compile cache, the `tmp` package's and npm's
 * folders (tmp-<pid>-…, npm-<pid>-…), jsii's kernel folders (CDKTF), the Go plugin sockets of
 * terraform and its providers (plugin<digits>). Other names (cdktf-probe, tmp.XXXX of mktemp…)
 * are too common on a shared machine to be told apart from other people's and are not counted.
 */
export const OURS = /^(kms-|node-compile-cache$|tmp-\d+-|npm-\d+-|jsii-kernel-|plugin\d+$)/;

/** Other runs' own folders: each run checks its own. */
const OTHER_RUNS = /^kms-sync-vitest-/;

/** The entries left in the run's folder that count as leaks, sorted. */
export function leftovers(names: string[]): string[] {
  return names.filter((n) => !RUN_FOLDER_CACHES.has(n)).sort();
}

/** Entries of ours that the shared folder has now and had not before the run, sorted. */
export function newSharedEntries(before: Set<string>, after: string[], ownRoot: string): string[] {
  return after.filter((n) => !before.has(n) && n !== ownRoot && OURS.test(n) && !OTHER_RUNS.test(n)).sort();
}
