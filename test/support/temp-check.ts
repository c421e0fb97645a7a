// The rules of the temporary-folder check (test/support/temp-root.ts), apart so they can be tested.

/**
 * Caches that tools the tests start keep in the run's folder and that are not a test's own files:
 * Node's compile cache (npm and vitest turn it on for the processes they start).
 */
export const RUN_FOLDER_CACHES = new Set(['node-compile-cache']);

/**
 * Names in the shared temporary folder that are ours: our own prefixes (kms-*, which covers every
 * kms-sync-* folder of the tests, the bench and the CLI), Node's compile cache, the `tmp` package's
 * and npm's folders (tmp-*, npm-*), vitest's and CDKTF/jsii's working folders, and the Go plugin
 * sockets terraform and its providers make (plugin<digits>).
 */
export const OURS = /^(kms-|node-compile-cache$|tmp-\d|npm-|vitest-|jsii-|cdktf|plugin\d)/;

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
