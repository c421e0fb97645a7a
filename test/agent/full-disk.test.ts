// A full disk in the agent's state folder (issue 36: "ENOSPC leaves empty lock temp files and names
// no file"). A full file system cannot be made here without root, so the kernel's file size limit
// stands in for it (`ulimit -f`, `prlimit --fsize`): a write past it fails with EFBIG just where
// ENOSPC fails (Node ignores SIGXFSZ), after the file was created. Each writer of the state folder
// (the heal, inventory, approval and history records, the owner and trust records, the run lock)
// must then name the file, leave no temp file behind and keep the old content; and an agent whose
// disk fills between reconciles says so, keeps running, and writes again once there is room.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../crash/lib.js';
import { agentConfig, fixture, logged, JSON_BODY, startAgent, until, type Fixture } from './lib.js';
import { patient } from '../support/patience.js';
import { skipWhen } from '../support/skip.js';

const dist = path.join(repoRoot, 'dist');
/** Files whose names mark them as temp files of a writer (`.x.tmp-…`, `x.….tmp`). */
const temps = (dir: string): string[] =>
  readdirSync(dir, { recursive: true, encoding: 'utf8' }).filter(
    (f) => !f.startsWith(`source${path.sep}`) && /\.tmp\b|\.tmp-/.test(path.basename(f)),
  );
const hasPrlimit = (() => {
  try {
    execFileSync('prlimit', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

describe('a full disk in the state folder', () => {
  let f: Fixture;
  beforeAll(async () => {
    f = await fixture();
    f.repo.push({ 'kms/kms-sync.yaml': agentConfig([{ name: 'alpha', keys: ['primary'] }]) }, 'first');
  }, patient(60_000));
  afterAll(() => f.cleanup());

  it('each writer names its file, leaves no temp file and keeps the old content', () => {
    const dir = path.join(f.root, 'writers');
    const kept = path.join(dir, 'store', '.kms-sync');
    mkdirSync(kept, { recursive: true, mode: 0o700 });
    const before: Record<string, string> = {
      [path.join(dir, 'heals.json')]: '[]\n',
      [path.join(kept, 'owner')]: 'old-owner\n',
      [path.join(kept, 'trust.json')]: '{"version":1,"stores":{},"env":[]}\n',
    };
    for (const [file, text] of Object.entries(before)) writeFileSync(file, text, { mode: 0o600 });
    const script = `
      import path from 'node:path';
      import { writeStateJson } from ${JSON.stringify(path.join(dist, 'engine', 'state-files.js'))};
      import { writeOwnerRecord } from ${JSON.stringify(path.join(dist, 'model', 'owner.js'))};
      import { writeTrustRecord } from ${JSON.stringify(path.join(dist, 'apply', 'trust.js'))};
      import { acquireLock } from ${JSON.stringify(path.join(dist, 'secrets', 'fsutil.js'))};
      const dir = process.env.DIR, store = path.join(dir, 'store');
      const out = {};
      const attempt = async (name, fn) => {
        try { await fn(); out[name] = 'written'; } catch (e) { out[name] = { code: e.code, message: e.message }; }
      };
      await attempt('record', () => writeStateJson(path.join(dir, 'heals.json'), [{ id: 1, address: 'client.x/y' }]));
      await attempt('owner', () => writeOwnerRecord(store, 'new-owner'));
      await attempt('trust', () => writeTrustRecord(store, { stores: [], envReferences: ['X'] }));
      await attempt('lock', () => acquireLock(path.join(store, '.kms-sync', 'run.lock'), { timeoutMs: 2000 }));
      console.log(JSON.stringify(out));
    `;
    // No byte may be written to a file: every write fails as on a full disk.
    const run = spawnSync(
      'sh',
      ['-c', 'ulimit -f 0 && exec "$0" --input-type=module -e "$1"', process.execPath, script],
      {
        env: { PATH: process.env.PATH, DIR: dir },
        encoding: 'utf8',
      },
    );
    expect(run.status, run.stderr).toBe(0);
    const out = JSON.parse(run.stdout) as Record<string, { code: string; message: string }>;
    const named = (file: string) => expect.stringContaining(file);
    expect(out).toEqual({
      record: { code: 'EFBIG', message: named(`cannot write ${path.join(dir, 'heals.json')}: EFBIG`) },
      owner: { code: 'EFBIG', message: named(`cannot write ${path.join(kept, 'owner')}: EFBIG`) },
      trust: { code: 'EFBIG', message: named(`cannot write ${path.join(kept, 'trust.json')}: EFBIG`) },
      lock: { code: 'EFBIG', message: named(`cannot create the lock file ${path.join(kept, 'run.lock')}: EFBIG`) },
    });
    expect(temps(dir)).toEqual([]);
    expect(existsSync(path.join(kept, 'run.lock'))).toBe(false);
    for (const [file, text] of Object.entries(before)) expect(readFileSync(file, 'utf8')).toBe(text);
  });

  it.skipIf(skipWhen(!hasPrlimit, 'prlimit (util-linux) is not installed: the agent cannot be given a full disk'))(
    'an agent whose disk fills says which file it could not write, keeps running, and writes again once there is room',
    async () => {
      const agent = await startAgent(f, ['--path', 'kms', '--interval', '1h', '--mode', 'sync']);
      try {
        await until(agent, 'the first reconcile', (x) => x.reconciles === 1);
        const historyFile = path.join(f.stateDir, 'history.json');
        const kept = readFileSync(historyFile, 'utf8');
        // The disk is full: no write of the agent (or of the git it runs) gets a byte in.
        execFileSync('prlimit', ['--pid', String(agent.pid()), '--fsize=0:']);
        expect((await agent.post('/api/reconcile', '{}', JSON_BODY)).status).toBe(202);
        let s = await until(agent, 'a reconcile on a full disk', (x) => x.reconciles === 2);
        expect(s.lastReconcile.result).not.toBe('success');
        const notKept = `the reconcile history could not be kept (cannot write ${historyFile}: EFBIG`;
        expect(await logged(agent, notKept)).toContain(notKept);
        expect(temps(f.stateDir)).toEqual([]);
        expect(readFileSync(historyFile, 'utf8')).toBe(kept);
        // Room again: the next reconcile succeeds and the history on disk is whole.
        execFileSync('prlimit', ['--pid', String(agent.pid()), '--fsize=unlimited:']);
        expect((await agent.post('/api/reconcile', '{}', JSON_BODY)).status).toBe(202);
        s = await until(agent, 'a reconcile with room again', (x) => x.reconciles === 3);
        expect(s.lastReconcile.result, JSON.stringify(s.lastReconcile)).toBe('success');
        expect(JSON.parse(readFileSync(historyFile, 'utf8'))).toEqual(s.history);
        expect(s.history.map((h: any) => h.result)).toEqual(['success', s.history[1].result, 'success']);
      } finally {
        agent.child.kill('SIGTERM');
        await agent.exit;
      }
    },
    patient(60_000),
  );
});
