// The run lock: two applies of one configuration must never run at once (both would issue the
// same new key; one raw value would be lost). Terraform's answer is a state lock; kms-sync has no
// state, so it takes two locks before it reads anything:
// - a local lock file `.kms-sync/run.lock` beside the configuration (same machine, same journal;
//   a holder whose process died is detected and broken);
// - a lock record in the service itself, one per environment and owner, so that CI jobs on
//   different machines serialize too: an endpoint `POST:/__kms-sync/lock/<owner hash>` created
//   with a check-and-set (creating an endpoint that exists is refused with 409 CONFLICT, see the
//   contract), carrying who holds it and until when. A holder refreshes it while it runs; one
//   whose expiry has passed (its run died) is broken. The reader hides these records.
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import path from 'node:path';
import { AmbiguousWriteError, ApiError } from '../api/http.js';
import type { KmsClient, WireEndpoint } from '../api/client.js';
import { ownerRecordId } from '../model/index.js';
import {
  acquireLock,
  earlierIncarnation,
  ensureDir,
  LockTimeoutError,
  pidAlive,
  type StateIncarnation,
} from '../secrets/fsutil.js';

export const LOCK_PATH_PREFIX = '/__kms-sync/lock/';
const LOCK_METHOD = 'POST';
/** A lock not refreshed for this long belongs to a run that died. */
const LOCK_TTL_MS = 10 * 60_000;
const HEARTBEAT_MS = 2 * 60_000;

/** Another run of this configuration holds the lock. */
export class RunLockedError extends Error {}

/** The lock could not be taken for another reason (the service unreachable, an odd answer): nothing was changed. */
export class RunLockError extends Error {}

export interface RunLockOptions {
  api: KmsClient;
  owner: string;
  envs: readonly string[];
  /** Configuration folder: the local lock lives in its `.kms-sync/`. */
  baseDir: string;
  /** How long to wait for a lock held by another run (0: fail at once, like Terraform's default). */
  timeoutMs: number;
  onWait?: (message: string) => void;
  /** Aborted (an interrupt): stop waiting for another run's lock. */
  signal?: AbortSignal;
  /**
   * The caller owns the state folder `baseDir` is in (the agent, agent/state-owner.ts): locks an
   * earlier incarnation of that folder's owner left, here and in the service, are broken at once.
   */
  incarnation?: StateIncarnation;
}

export interface RunLock {
  release(): Promise<void>;
}

export function lockPathFor(owner: string): string {
  return `${LOCK_PATH_PREFIX}${ownerRecordId(owner)}`;
}

const sleep = (ms: number) => new Promise((ok) => setTimeout(ok, ms));

export async function acquireRunLock(o: RunLockOptions): Promise<RunLock> {
  const dir = path.join(o.baseDir, '.kms-sync');
  await ensureDir(dir);
  let local;
  try {
    local = await acquireLock(path.join(dir, 'run.lock'), {
      timeoutMs: o.timeoutMs,
      ...(o.signal ? { signal: o.signal } : {}),
      ...(o.incarnation ? { incarnation: o.incarnation } : {}),
      // As Terraform says "Acquiring state lock…": a wait up to --lock-timeout is never silent.
      onWait: (h) =>
        o.onWait?.(
          `Waiting for the run lock ${path.join(dir, 'run.lock')}${h ? ` (pid ${h.pid} on ${h.host} since ${h.createdAt})` : ''}…`,
        ),
    });
  } catch (e) {
    if (o.signal?.aborted)
      throw new RunLockedError(`stopped waiting for the run lock ${path.join(dir, 'run.lock')}: interrupted`);
    if (e instanceof LockTimeoutError) {
      throw new RunLockedError(
        `another kms-sync run of this configuration holds ${e.lockPath}${e.holder ? ` (pid ${e.holder.pid} on ${e.holder.host} since ${e.holder.createdAt})` : ''}; wait for it, or pass --lock-timeout DURATION to wait (see docs/troubleshooting.md#run-lock-held)`,
      );
    }
    throw new RunLockError(`could not take the run lock ${path.join(dir, 'run.lock')}: ${(e as Error).message}`);
  }
  const held: string[] = [];
  const mp = `${LOCK_METHOD}:${lockPathFor(o.owner)}`;
  const holder = `${os.hostname()} pid ${process.pid} run ${randomUUID().slice(0, 8)}`;
  const acquiredAt = new Date().toISOString();
  const metadata = () => ({
    owner: o.owner,
    holder,
    host: os.hostname(),
    pid: process.pid,
    acquiredAt,
    expiresAt: new Date(Date.now() + LOCK_TTL_MS).toISOString(),
    ...(o.incarnation ? { state: o.incarnation.state, instance: o.incarnation.instance } : {}),
  });
  const mine = (e: WireEndpoint | undefined) => (e?.metadata as { holder?: string } | undefined)?.holder === holder;
  const releaseAll = async () => {
    for (const env of held.splice(0)) {
      await o.api.deleteEndpoint(env, mp).catch(() => undefined); // an expired lock may be gone already
    }
    await local.release();
  };
  try {
    const deadline = Date.now() + o.timeoutMs;
    for (const env of [...o.envs].sort()) {
      for (let announced = false, lost = 0; ; ) {
        let unknown = false;
        try {
          await o.api.createEndpoints(env, [
            {
              method: LOCK_METHOD,
              path: lockPathFor(o.owner),
              name: 'kms-sync run lock',
              description: `Held by a kms-sync apply of configuration ${o.owner}; removed when it ends.`,
              metadata: metadata(),
            },
          ]);
          held.push(env);
          break;
        } catch (e) {
          // An environment that does not exist yet cannot hold a record: this run creates it, and
          // a concurrent one fails on the project create (409) before it issues any key.
          if (e instanceof ApiError && e.status === 404) break;
          // No answer: the record may be ours now. The re-read below tells (it names its holder).
          if (e instanceof AmbiguousWriteError) unknown = true;
          else if (!(e instanceof ApiError) || e.status !== 409) throw e;
        }
        const current = await o.api
          .listEndpoints(env)
          .then((list) => list.find((x) => `${x.method.toUpperCase()}:${x.path}` === mp));
        if (mine(current)) {
          held.push(env);
          break;
        }
        if (unknown && !current) {
          // The create had not taken effect: send it again, a few times.
          if (++lost >= 5)
            throw new RunLockError(
              `could not take the run lock of ${env}: ${lost} attempts to create its record went unanswered; nothing was changed`,
            );
          continue;
        }
        const info = (current?.metadata ?? {}) as {
          holder?: string;
          host?: string;
          pid?: number;
          acquiredAt?: string;
          expiresAt?: string;
        };
        // Stale: its time ran out, or it was taken on this machine by a process that is gone (a
        // killed run; this one holds the local lock, so no live run of this folder has it).
        // Or it names the state folder this run's owner holds, and another start of it: an earlier
        // incarnation (a killed agent restarted as pid 1 again, or in a new pod), dead by construction.
        const earlier = earlierIncarnation(info as { state?: unknown; instance?: unknown }, o.incarnation);
        if (current && earlier)
          o.onWait?.(
            `Breaking the run lock of ${env}: it was left by an earlier start of this agent (${describe(current)})`,
          );
        const dead =
          earlier ||
          (info.host === os.hostname() &&
            typeof info.pid === 'number' &&
            info.pid !== process.pid &&
            !pidAlive(info.pid));
        // A record whose expiry is not a timestamp (`expiresAt: "soon"`, none at all) or lies further
        // ahead than any holder sets it would block every apply forever: treated as expired, and said.
        const expires = typeof info.expiresAt === 'string' ? Date.parse(info.expiresAt) : NaN;
        const unreadable =
          current !== undefined && (!Number.isFinite(expires) || expires > Date.now() + 2 * LOCK_TTL_MS);
        if (unreadable) {
          o.onWait?.(
            `Breaking the run lock of ${env}: its record does not parse (expiresAt ${JSON.stringify(String(info.expiresAt ?? 'missing')).slice(0, 60)} is not a time within ${(LOCK_TTL_MS / 60_000) * 2} minutes), so it is treated as expired`,
          );
        }
        if (!current || dead || unreadable || expires < Date.now()) {
          // Gone meanwhile, or its run died without releasing it: break it and try again.
          if (current) await o.api.deleteEndpoint(env, mp).catch(() => undefined);
          continue;
        }
        if (Date.now() >= deadline) {
          throw new RunLockedError(
            `environment ${env} is locked by another kms-sync run of configuration ${o.owner} (${describe(current)}); wait for it, or pass --lock-timeout DURATION to wait`,
          );
        }
        if (!announced) o.onWait?.(`Waiting for the run lock of ${env} (${describe(current)})…`);
        announced = true;
        if (o.signal?.aborted) throw new RunLockedError(`stopped waiting for the run lock of ${env}: interrupted`);
        await sleep(Math.min(1000, Math.max(50, deadline - Date.now())));
      }
    }
  } catch (e) {
    await releaseAll();
    if (e instanceof RunLockedError || e instanceof RunLockError) throw e;
    // Not another run's lock: the service could not be asked (or answered oddly). Said as what it is about.
    throw new RunLockError(
      `could not take the run lock in the service (${(e as Error).message}); nothing was changed`,
      { cause: e },
    );
  }
  const heartbeat = setInterval(() => {
    for (const env of held) void o.api.updateEndpoint(env, mp, { metadata: metadata() }).catch(() => undefined);
  }, HEARTBEAT_MS);
  heartbeat.unref();
  return {
    release: async () => {
      clearInterval(heartbeat);
      await releaseAll();
    },
  };
}

function describe(e: WireEndpoint): string {
  const m = (e.metadata ?? {}) as { holder?: string; acquiredAt?: string; expiresAt?: string };
  return `held by ${m.holder ?? 'an unknown run'} since ${m.acquiredAt ?? '?'}, expires ${m.expiresAt ?? '?'} unless refreshed`;
}
