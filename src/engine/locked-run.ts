// The start of a run that writes (apply, rotate, destroy): the configuration loaded and narrowed to
// its shard, the connection, the owner, and the run lock of the environments it reaches, held while
// `run` works and released after it (issue 37 item 3: the run of a configuration is the engine's;
// the front ends parse flags and print).
import { KmsClient } from '../api/client.js';
import { NotStreamable } from '../config/index.js';
import { acquireRunLock, RunLockedError, RunLockError } from '../apply/run-lock.js';
import { UsageError } from './errors.js';
import { frontEnd } from './front-end.js';
import { resolveOwner } from './owner.js';
import {
  connect,
  loadConfig,
  type Connection,
  type GlobalOptions,
  type LoadedConfig,
  type PlanOptions,
  type StreamedAttempt,
} from './run.js';
import { shardConfig } from './shard.js';

/** Runs `fn` holding the run lock of `envs` (apply/run-lock.ts); without it when `lock` is false. */
export async function withRunLock<T>(
  conn: Connection,
  o: {
    owner: string;
    envs: readonly string[];
    baseDir: string;
    timeoutMs: number;
    lock?: boolean;
    signal?: AbortSignal;
  },
  fn: () => Promise<T>,
): Promise<T> {
  if (o.lock === false) return fn();
  // The lock has its own connection: an interrupt cuts the run's reads, never the lock's release.
  const lockApi = new KmsClient(conn.api.http.fork());
  let lock;
  try {
    lock = await acquireRunLock({
      api: lockApi,
      owner: o.owner,
      envs: o.envs,
      baseDir: o.baseDir,
      timeoutMs: o.timeoutMs,
      onWait: (m) => frontEnd().notice(`${m}\n`),
      ...(o.signal ? { signal: o.signal } : {}),
    });
  } catch (e) {
    await lockApi.close();
    if (e instanceof RunLockedError || e instanceof RunLockError) throw new UsageError(e.message);
    throw e;
  }
  try {
    return await fn();
  } finally {
    await lock.release();
    await lockApi.close();
  }
}

/** What a locked run of a configuration works with. */
export interface LockedRun {
  conn: Connection;
  /** The configuration, narrowed to the shard's environments with --shard. */
  cfg: LoadedConfig;
  shard?: NonNullable<PlanOptions['shard']>;
  owner: string;
}

/**
 * Loads the configuration, connects, narrows it to `shard` (`--shard K/N`), resolves its owner and
 * runs `run` under the run lock of its environments; the connection is closed after it. With
 * `stream` (streamedOrWhole), the configuration is loaded environment by environment: `run` passes
 * `cfg.bodies` to planFor and writes nothing before that plan is made.
 */
export async function runConfigLocked<T>(
  o: GlobalOptions & { shard?: string; lock?: boolean; stream?: StreamedAttempt },
  lock: { timeoutMs: number; signal?: AbortSignal; onRetry: (line: string) => void },
  run: (r: LockedRun) => Promise<T>,
): Promise<T> {
  const loaded = await loadConfig(o);
  const conn = connect(o, process.env, lock.onRetry);
  try {
    const { cfg, shard } = shardConfig(loaded, o.shard, o.file);
    const { owner } = await resolveOwner(cfg.desired, cfg.baseDir);
    return await withRunLock(
      conn,
      {
        owner,
        envs: cfg.desired.envs.map((e) => e.projectEnv),
        baseDir: cfg.baseDir,
        timeoutMs: lock.timeoutMs,
        ...(o.lock === false ? { lock: false } : {}),
        ...(lock.signal ? { signal: lock.signal } : {}),
      },
      () => run({ conn, cfg, ...(shard ? { shard } : {}), owner }),
    );
  } catch (e) {
    // Loaded whole next (streamedOrWhole): the reads of this attempt are cut, not retried, and say nothing.
    if (e instanceof NotStreamable) conn.api.http.stop();
    throw e;
  } finally {
    await conn.api.close();
  }
}
