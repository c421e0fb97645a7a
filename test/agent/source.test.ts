// The agent's git source after a git command was cut off (the agent stopped or killed during its
// first fetch, found by the crash campaign's agent scenario): a half-made .git (no HEAD, a
// HEAD.lock) or a config.lock left behind must not stop every later start; the checkout is made
// again and the commit fetched. Real git, a bare repository on disk.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { once } from 'node:events';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { GitSource } from '../../src/agent/source.js';
import { Repo } from './lib.js';

describe('agent source after a cut-off git command', () => {
  let root: string;
  afterEach(() => rmSync(root, { recursive: true, force: true }));

  const setup = () => {
    root = mkdtempSync(path.join(tmpdir(), 'kms-sync-source-'));
    const repo = new Repo(root);
    const rev = repo.push({ 'kms-sync.yaml': 'apiVersion: kms-sync/v1\n' }, 'first');
    const dir = path.join(root, 'state', 'source');
    return { repo, rev, dir, env: { PATH: process.env.PATH, HOME: root } };
  };

  it('a .git left half-made by an interrupted `git init` (HEAD.lock, no HEAD) is made again', async () => {
    const { repo, rev, dir, env } = setup();
    for (const d of ['branches', 'hooks', 'info', 'refs/heads', 'refs/tags'])
      mkdirSync(path.join(dir, '.git', d), { recursive: true });
    writeFileSync(path.join(dir, '.git', 'HEAD.lock'), 'ref: refs/heads/master\n');
    writeFileSync(path.join(dir, '.git', 'description'), 'x\n');
    const source = new GitSource({ repo: repo.url, dir, env });
    expect(await source.fetch()).toBe(rev);
    await source.checkout(rev);
    expect(await source.subject(rev)).toBe('first');
  });

  it('a config.lock left by an interrupted `git remote add` is cleared with the checkout', async () => {
    const { repo, rev, dir, env } = setup();
    expect(await new GitSource({ repo: repo.url, dir, env }).fetch()).toBe(rev);
    writeFileSync(path.join(dir, '.git', 'config.lock'), '');
    expect(await new GitSource({ repo: repo.url, dir, env }).fetch()).toBe(rev);
  });

  it('an index.lock left by a checkout cut off with its agent is cleared once no process works in the checkout', async () => {
    const { repo, rev, dir, env } = setup();
    const source = new GitSource({ repo: repo.url, dir, env });
    await source.checkout(await source.fetch());
    const next = repo.push({ 'kms-sync.yaml': 'apiVersion: kms-sync/v1\n# second\n' }, 'second');
    const lock = path.join(dir, '.git', 'index.lock');
    writeFileSync(lock, '');
    // A git of a killed agent still finishing in the checkout (here a stand-in working there): its fresh lock stays, the checkout fails and says why.
    const straggler = spawn('sleep', ['300'], { cwd: dir, stdio: 'ignore' });
    const gone = once(straggler, 'exit');
    try {
      const restarted = new GitSource({ repo: repo.url, dir, env });
      expect(await restarted.fetch()).toBe(next);
      await expect(restarted.checkout(next)).rejects.toThrow(
        /git checkout failed: fatal: Unable to create .*index\.lock.: File exists/,
      );
      expect(existsSync(lock)).toBe(true);
    } finally {
      straggler.kill('SIGKILL');
      await gone;
    }
    // Once nothing works there, the fresh lock is stale (as after a stop that cut the checkout off): removed, and the checkout goes on.
    const restarted = new GitSource({ repo: repo.url, dir, env });
    await restarted.checkout(next);
    expect(existsSync(lock)).toBe(false);
    expect(await restarted.subject('HEAD')).toBe('second');
    expect(rev).not.toBe(next);
  });
});
