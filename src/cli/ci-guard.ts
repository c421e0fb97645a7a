// In CI a local store file is a place keys go to die: the runner is discarded when the job ends, and
// with it every raw key written there, whether or not git tracks the file (a workflow that does not
// commit and push it loses them). So, in CI, issuing keys into a local file store is refused before
// any key is issued unless the user opts in (flag, environment variable or configuration setting);
// an opted-in run ends by naming the files to commit and push. The rule is secrets/ci-local-store.ts.
import { existsSync } from 'node:fs';
import path from 'node:path';
import type { ApplyResult } from '../apply/execute.js';
import { opStores } from '../apply/execute.js';
import type { Plan } from '../plan/types.js';
import {
  commitReminder,
  isCi,
  localStoreFile,
  localStoreOptedIn,
  localStoreRefusal,
} from '../secrets/ci-local-store.js';
import type { StoreRegistry } from '../secrets/registry.js';
import { UsageError } from './errors.js';

/** A local store file this run issues keys into. */
export interface LocalStoreTarget {
  /** Path as shown (relative to the working directory when inside it): what `git add` takes. */
  file: string;
  /** The store's display URI, as in key receipts. */
  store: string;
  /** Keys the plan issues into it. */
  keys: number;
}

/** What an opted-in CI run must commit and push: the last lines of apply/rotate, and a JSON field. */
export interface CommitRequired {
  files: { file: string; keys: number }[];
  journal?: string;
  lines: string[];
}

export function displayPath(file: string, cwd = process.cwd()): string {
  const rel = path.relative(cwd, file);
  return rel && !rel.startsWith('..') && !path.isAbsolute(rel) ? rel.split(path.sep).join('/') : file;
}

/**
 * In CI: the local store files the plan issues keys into. Not opted in and there are some: refused
 * (UsageError, exit 1) before anything is issued. Outside CI: nothing to watch (empty list).
 */
export async function guardLocalStoreInCi(
  plan: Plan,
  registry: StoreRegistry,
  opts: { allow: boolean; env: NodeJS.ProcessEnv },
): Promise<LocalStoreTarget[]> {
  if (!isCi(opts.env)) return [];
  const perStore = new Map<string | undefined, number>();
  for (const name of plan.operations.flatMap(opStores)) perStore.set(name, (perStore.get(name) ?? 0) + 1);
  return guardLocalStoresInCi(perStore, registry, opts);
}

/** guardLocalStoreInCi from the keys a run issues per store (a fleet applied environment by environment: engine/stream-apply.ts). */
export async function guardLocalStoresInCi(
  perStore: ReadonlyMap<string | undefined, number>,
  registry: StoreRegistry,
  opts: { allow: boolean; env: NodeJS.ProcessEnv },
): Promise<LocalStoreTarget[]> {
  if (!isCi(opts.env)) return [];
  const targets = new Map<string, LocalStoreTarget>();
  for (const [name, keys] of perStore) {
    const store = await registry.get(name);
    const file = localStoreFile(store);
    if (!file) continue;
    const t = targets.get(file) ?? {
      file: displayPath(path.resolve(registry.baseDir, file)),
      store: store.displayUri,
      keys: 0,
    };
    t.keys += keys;
    targets.set(file, t);
  }
  const local = [...targets.values()];
  if (local.length > 0 && !opts.allow && !localStoreOptedIn(opts.env))
    throw new UsageError(localStoreRefusal(local, opts.env));
  return local;
}

/** After an opted-in CI run: the files it wrote keys into, and the journal if it is left behind. */
export function commitRequired(
  local: readonly LocalStoreTarget[],
  result: ApplyResult | undefined,
  journalPath: string,
  env: NodeJS.ProcessEnv,
): CommitRequired | undefined {
  if (!isCi(env)) return undefined;
  const files = local
    .map((t) => ({ file: t.file, keys: (result?.keysStored ?? []).filter((k) => k.store === t.store).length }))
    .filter((f) => f.keys > 0);
  const journal = local.length > 0 && existsSync(journalPath) ? displayPath(journalPath) : undefined;
  if (files.length === 0 && !journal) return undefined;
  return { files, ...(journal ? { journal } : {}), lines: commitReminder(files, journal) };
}
