// Issue 35 item 8: the systemd unit hands secrets over as credentials (LoadCredential=), not an
// environment file. The built agent, started with no KMS_API_KEY in its environment and the key
// as a file in $CREDENTIALS_DIRECTORY (as systemd lays it out, with a trailing newline), reads the
// service: its first reconcile succeeds. A variable already set wins over a credential.
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { printedSecrets } from '../crash/lib.js';
import { agentConfig, API_KEY, fixture, startAgent, until, type Fixture } from './lib.js';

let f: Fixture;
beforeAll(async () => {
  f = await fixture();
  f.repo.push({ 'config/kms-sync.yaml': agentConfig([{ name: 'alpha', keys: ['primary'] }]) }, 'first');
});
afterAll(async () => {
  expect(printedSecrets(f.outputs)).toEqual([]);
  await f.cleanup();
});

describe('kms-sync agent under systemd credentials', () => {
  it('takes KMS_API_KEY from $CREDENTIALS_DIRECTORY when the environment has none; an environment variable wins', async () => {
    const creds = path.join(f.root, 'credentials');
    mkdirSync(creds, { mode: 0o700 });
    writeFileSync(path.join(creds, 'KMS_API_KEY'), `${API_KEY}\n`, { mode: 0o400 });
    writeFileSync(path.join(creds, 'not-a-variable'), 'ignored');
    const noKey = { KMS_API_KEY: undefined } as unknown as Record<string, string>;
    const agent = await startAgent(f, ['--path', 'config', '--interval', '1h', '--mode', 'detect'], {
      ...noKey,
      CREDENTIALS_DIRECTORY: creds,
    });
    const s = await until(agent, 'a reconcile with the key from the credential', (x) => x.lastReconcile !== undefined);
    expect(s.lastReconcile.result, JSON.stringify(s.lastReconcile)).toBe('success');
    agent.child.kill('SIGTERM');
    await agent.exit;

    const wrong = await startAgent(f, ['--path', 'config', '--interval', '1h', '--mode', 'detect'], {
      KMS_API_KEY: 'sk_test_wrongwrongwrongwrong',
      CREDENTIALS_DIRECTORY: creds,
    });
    const w = await until(wrong, 'a reconcile with the key from the environment', (x) => x.lastReconcile !== undefined);
    expect(w.lastReconcile.result).not.toBe('success');
    wrong.child.kill('SIGTERM');
    await wrong.exit;
  });
});
