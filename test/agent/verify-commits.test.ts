// --verify-commits (issue 36): the agent reconciles only commits signed by a key of the operator's
// ssh allowed-signers file, as Flux verifies a GitRepository's commits and Argo CD its GnuPG keys.
// Mounted as the attack it stops: a committer on the watched branch without a trusted key pushes
// an unsigned commit, then one signed with a key of their own; both are refused like invalid
// revisions (reported, never applied, the last good one reconciled). A key added to the file (a
// ConfigMap updated) lets the refused head through without a new commit. Real git, ssh-keygen
// signatures (gpg.format ssh), the built agent and CLI, the emulator.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cli, printedSecrets } from '../crash/lib.js';
import { skipWhen } from '../support/skip.js';
import { agentConfig, fixture, logged, startAgent, until, type AgentProc, type Fixture } from './lib.js';
import { patient } from '../support/patience.js';

const ENV = 'agent-production';
const hasSshKeygen = spawnSync('ssh-keygen', ['-?'], { stdio: 'ignore' }).error === undefined;

describe.skipIf(skipWhen(!hasSshKeygen, 'the signed-commit test needs ssh-keygen (apt-get install openssh-client)'))(
  '--verify-commits',
  () => {
    let f: Fixture;
    let agent: AgentProc;
    let trusted: string;
    let stranger: string;
    let allowed: string;
    const names = async () => (await f.emu.clients(ENV)).map((c) => c.name).sort();
    const key = (name: string) => {
      const file = path.join(f.root, 'keys', name);
      execFileSync('ssh-keygen', ['-q', '-t', 'ed25519', '-N', '', '-C', name, '-f', file]);
      return file;
    };
    const signer = (principal: string, file: string) =>
      `${principal} namespaces="git" ${readFileSync(`${file}.pub`, 'utf8').split(' ').slice(0, 2).join(' ')}\n`;

    beforeAll(async () => {
      f = await fixture();
      execFileSync('mkdir', ['-p', path.join(f.root, 'keys'), path.join(f.root, 'trust')]);
      trusted = key('ops');
      stranger = key('stranger');
      allowed = path.join(f.root, 'trust', 'allowed_signers');
      writeFileSync(allowed, `# the operator's keys\n${signer('ops@example.com', trusted)}`);
    });
    afterAll(async () => {
      agent?.child.kill('SIGTERM');
      await agent?.exit;
      expect(printedSecrets(f.outputs)).toEqual([]);
      await f.cleanup();
    });

    it('refuses an allowed signers file in the state folder or without a key, before it starts', () => {
      const run = (file: string) =>
        spawnSync(
          process.execPath,
          [cli, 'agent', '--repo', f.repo.url, '--state-dir', f.stateDir, '--verify-commits', file],
          {
            cwd: f.root,
            encoding: 'utf8',
            env: {
              PATH: process.env.PATH,
              HOME: f.root,
              KMS_API_URL: f.emu.url,
              KMS_API_KEY: 'sk_test_unused000000000000',
            },
          },
        );
      const empty = path.join(f.root, 'trust', 'empty');
      writeFileSync(empty, '# nobody yet\n');
      const r1 = run(empty);
      expect(r1.status).toBe(1);
      expect(r1.stderr).toMatch(/no key in the allowed signers file/);
      const r2 = run(path.join(f.stateDir, 'source', 'allowed_signers'));
      expect(r2.status).toBe(1);
      expect(r2.stderr).toMatch(/inside the state folder/);
      expect(existsSync(path.join(f.stateDir, 'source'))).toBe(false);
    });

    it(
      'applies a trusted signed commit; refuses an unsigned one and one signed by an unknown key; a key added to the file lets it through',
      async () => {
        const good = f.repo.push(
          { 'kms/kms-sync.yaml': agentConfig([{ name: 'alpha', keys: ['primary'] }]) },
          'first, signed',
          trusted,
        );
        agent = await startAgent(f, [
          '--path',
          'kms',
          '--interval',
          '1s',
          '--mode',
          'sync',
          '--verify-commits',
          allowed,
        ]);
        await until(agent, 'the signed commit applied', (x) => x.revision.synced === good);
        expect(await names()).toEqual(['alpha']);
        const signedBy = /revision [0-9a-f]{12} signed by ops@example\.com \(SHA256:/;
        expect(await logged(agent, signedBy)).toMatch(signedBy);

        // A committer without a trusted key: an unsigned commit.
        const unsigned = f.repo.push(
          {
            'kms/kms-sync.yaml': agentConfig([
              { name: 'alpha', keys: ['primary'] },
              { name: 'mallory', keys: ['primary'] },
            ]),
          },
          'add a client\n\nkms-sync: approve-deletes',
        );
        let s = await until(
          agent,
          'the unsigned commit refused',
          (x) => x.revision.invalid?.revision === unsigned && x.lastReconcile?.revision === unsigned,
        );
        expect(s.revision.invalid).toMatchObject({ unverified: true });
        expect(s.revision.invalid.errors[0]).toMatch(
          /^revision [0-9a-f]{12} is not signed: with --verify-commits only commits signed by a key of .*allowed_signers are reconciled/,
        );
        expect(s.condition).toMatchObject({ status: 'False', reason: 'UnverifiedRevision' });
        expect(s.revision.lastGood).toBe(good);

        // The same committer signs with a key of their own.
        const foreign = f.repo.push(
          {
            'kms/kms-sync.yaml': agentConfig([
              { name: 'alpha', keys: ['primary'] },
              { name: 'mallory', keys: ['primary', 'backup'] },
            ]),
          },
          'signed by me',
          stranger,
        );
        s = await until(
          agent,
          'the foreign signature refused',
          (x) => x.revision.invalid?.revision === foreign && x.lastReconcile?.revision === foreign,
        );
        expect(s.revision.invalid.errors[0]).toMatch(
          /is signed by a key that is not in .*allowed_signers \(SHA256:[\w+/]+\): not trusted, not reconciled/,
        );
        // Several reconciles later: nothing of either was applied; the last good revision is what is reconciled.
        const n = s.reconciles;
        s = await until(agent, 'two more reconciles', (x) => x.reconciles >= n + 2);
        expect(await names()).toEqual(['alpha']);
        expect(s.revision.synced).toBe(good);
        expect(s.lastReconcile.subject).toBe('signed by me');
        // The operator's view: Ready False with the reason, exit 2.
        const shown = spawnSync(process.execPath, [cli, 'agent', 'status', '--url', agent.url], {
          encoding: 'utf8',
          env: { PATH: process.env.PATH, HOME: f.root },
        });
        expect(shown.status).toBe(2);
        expect(shown.stdout).toMatch(
          /^Ready +False UnverifiedRevision: revision [0-9a-f]{12} is signed by a key that is not in/m,
        );

        // The operator trusts the second key (the file changes in place, as a ConfigMap does): the head is checked again and applied.
        writeFileSync(allowed, `${readFileSync(allowed, 'utf8')}${signer('stranger@example.com', stranger)}`);
        await until(agent, 'the head applied once its key is trusted', (x) => x.revision.synced === foreign);
        expect(await names()).toEqual(['alpha', 'mallory']);
      },
      patient(90_000),
    );
  },
);
