// Issue 34, mounted against the built agent by a committer on the watched branch: store paths that
// leave STATE/store (`sops:../../x`, `sops:../source/…`) are refused unless the operator policy
// allows them; recipients declared by a commit never reach the state folder's store through
// another store's declaration, and one added to the store that holds the keys is refused until the
// agent runs with --allow-new-recipients. The attacker's identity opens none of the earlier keys.
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { generateX25519Identity, identityToRecipient } from 'age-encryption';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { printedSecrets, readSopsStore } from '../crash/lib.js';
import { agentConfig, fixture, startAgent, until, type AgentProc, type Fixture } from './lib.js';
import { patient } from '../support/patience.js';

const CONFIG = 'config/kms-sync.yaml';
const storeFile = (f: Fixture) => path.join(f.stateDir, 'store', '.kms-sync', 'secrets.sops.yaml');
const withStores = (stores: string, config: string) =>
  config.replace('apiVersion: kms-sync/v1\n', `apiVersion: kms-sync/v1\nstores:\n${stores}`);

async function stop(agent: AgentProc) {
  agent.child.kill('SIGTERM');
  await agent.exit;
}

describe('kms-sync agent under the operator policy', () => {
  let f: Fixture;
  let attacker: { identity: string; recipient: string; keyFile: string };
  beforeAll(async () => {
    f = await fixture();
    const identity = await generateX25519Identity();
    attacker = {
      identity,
      recipient: await identityToRecipient(identity),
      keyFile: path.join(f.root, 'attacker-age.txt'),
    };
    writeFileSync(attacker.keyFile, `${identity}\n`, { mode: 0o600 });
  });
  afterAll(async () => {
    expect(printedSecrets(f.outputs)).toEqual([]);
    await f.cleanup();
  });

  it(
    'store paths out of STATE/store (sops:../../x, sops:../source/…) are an invalid revision, never written',
    async () => {
      const first = f.repo.push({ [CONFIG]: agentConfig([{ name: 'alpha', keys: ['primary'] }]) }, 'first');
      const agent = await startAgent(f, ['--path', 'config', '--interval', '1s', '--mode', 'sync']);
      await until(agent, 'the first commit applied', (x) => x.revision.synced === first);
      for (const uri of ['sops:../../x/secrets.sops.yaml', 'sops:../source/config/stolen.sops.yaml']) {
        const rev = f.repo.push(
          {
            [CONFIG]: withStores(
              `  - { name: out, default: true, uri: "${uri}" }\n`,
              agentConfig([
                { name: 'alpha', keys: ['primary'] },
                { name: 'beta', keys: ['primary'] },
              ]),
            ),
          },
          `store at ${uri}`,
        );
        const s = await until(agent, `the revision with ${uri} refused`, (x) => x.revision.invalid?.revision === rev);
        expect(s.revision.invalid.errors.join('\n')).toMatch(
          /stores\[0\]\.uri: store "out" \(sops:\S+\) resolves outside the folder store files stay in \(the configuration folder; the agent's STATE\/store\), and the operator policy keeps store files inside it/,
        );
        // The status (and with it the page, notifications, commit statuses) names no path of the host.
        expect(JSON.stringify(s)).not.toContain(f.stateDir);
      }
      expect(existsSync(path.join(f.root, 'x'))).toBe(false);
      expect(existsSync(path.join(f.stateDir, 'source', 'config', 'stolen.sops.yaml'))).toBe(false);
      expect((await f.emu.clients('agent-production')).map((c) => c.name)).toEqual(['alpha']);
      await stop(agent);
    },
    patient(60_000),
  );

  it(
    'a commit declaring the attacker as a recipient: never added through another store, refused on the store that holds the keys until allowed',
    async () => {
      const before = readFileSync(storeFile(f), 'utf8');
      const earlier = Object.keys(await readSopsStore(storeFile(f), path.join(f.stateDir, 'age', 'keys.txt')));
      expect(earlier.length).toBeGreaterThan(0);
      const agent = await startAgent(f, ['--path', 'config', '--interval', '1s', '--mode', 'sync']);
      // An unused store with the attacker, and a new key: the key lands in the state folder's store, the attacker does not.
      const unused = f.repo.push(
        {
          [CONFIG]: withStores(
            `  - { name: audit, uri: "sops:audit.sops.yaml", options: { recipients: [${attacker.recipient}] } }\n`,
            agentConfig([
              { name: 'alpha', keys: ['primary'] },
              { name: 'gamma', keys: ['primary'] },
            ]),
          ),
        },
        'unused store with a recipient',
      );
      await until(agent, 'the unused-store commit applied', (x) => x.revision.synced === unused);
      expect(readFileSync(storeFile(f), 'utf8')).not.toContain(attacker.recipient);
      await expect(readSopsStore(storeFile(f), attacker.keyFile)).rejects.toThrow();

      // The recipient on the store that holds the keys: refused, the store file unchanged.
      const held = readFileSync(storeFile(f), 'utf8');
      const widening = f.repo.push(
        {
          [CONFIG]: withStores(
            `  - { name: main, default: true, uri: "sops:.kms-sync/secrets.sops.yaml", options: { recipients: [${attacker.recipient}] } }\n`,
            agentConfig([
              { name: 'alpha', keys: ['primary'] },
              { name: 'gamma', keys: ['primary'] },
              { name: 'delta', keys: ['primary'] },
            ]),
          ),
        },
        'recipient on the main store',
      );
      const s = await until(
        agent,
        'the widening commit refused',
        (x) => x.lastReconcile?.revision === widening && x.lastReconcile?.result === 'failed',
      );
      expect(s.lastReconcile.errors.join('\n')).toContain(
        'refusing to apply: the plan adds recipients to secret stores that already hold keys',
      );
      expect(readFileSync(storeFile(f), 'utf8')).toBe(held);
      await expect(readSopsStore(storeFile(f), attacker.keyFile)).rejects.toThrow();
      expect(before).not.toContain(attacker.recipient);
      await stop(agent);
    },
    patient(90_000),
  );
});
