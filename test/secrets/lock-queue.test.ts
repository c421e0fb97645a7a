// The lock's time limit is about other processes: callers of one process queue for it without
// timing out, however long the queue (issue 16: "journal.lock is held by another process" under
// load with no other process running).
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { AgeKeys } from '../../src/secrets/age-keys.js';
import { LockTimeoutError, withLock } from '../../src/secrets/fsutil.js';
import { Journal } from '../../src/secrets/journal.js';
import { meta, sandbox, type Sandbox } from './helpers.js';

let sb: Sandbox;
beforeEach(async () => {
  sb = await sandbox();
});
afterEach(async () => {
  await sb.cleanup();
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('in-process lock queue', () => {
  it('a caller waiting behind holders of its own process longer than the time limit still gets the lock', async () => {
    const lock = path.join(sb.dir, 'x.lock');
    const order: string[] = [];
    const first = withLock(lock, { timeoutMs: 30 }, async () => {
      await sleep(150);
      order.push('first');
    });
    const second = withLock(lock, { timeoutMs: 30 }, async () => {
      order.push('second');
    });
    await Promise.all([first, second]);
    expect(order).toEqual(['first', 'second']);
    await expect(fs.stat(lock)).rejects.toThrow();
  });

  it('still times out on a lock file held by another live process, naming it', async () => {
    const lock = path.join(sb.dir, 'y.lock');
    await fs.writeFile(lock, JSON.stringify({ pid: 1, host: os.hostname(), createdAt: 'then' }));
    const err = await withLock(lock, { timeoutMs: 50 }, async () => undefined).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LockTimeoutError);
    expect((err as Error).message).toContain('pid 1');
  });

  it('a hundred concurrent journal appends in one process all land, with a 20 ms lock limit', async () => {
    await new AgeKeys({ env: sb.env }).recipients(); // the identity exists, as after apply's prepare()
    const j = new Journal(path.join(sb.dir, 'config', '.kms-sync', 'journal'), { env: sb.env, lockTimeoutMs: 20 });
    const ids = await Promise.all(
      Array.from({ length: 100 }, (_, i) =>
        j.append({
          storeUri: 'sops:s.yaml',
          name: `e/c/k${i}`,
          value: `kmsc_${String(i).padStart(43, 'x')}`,
          meta: meta(`e/c/k${i}`),
        }),
      ),
    );
    expect(new Set(ids).size).toBe(100);
    expect((await j.pendingIds()).length).toBe(100);
  });
});
