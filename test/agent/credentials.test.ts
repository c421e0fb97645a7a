// Issue 35 item 8: the systemd unit hands secrets over as credentials (LoadCredential=), not an
// environment file. The built agent, started with no KMS_API_KEY in its environment and the key
// as a file in $CREDENTIALS_DIRECTORY (as systemd lays it out, with a trailing newline), reads the
// service: its first reconcile succeeds. A variable already set wins over a credential. A key
// set this way is set at run time: a service that echoes it (every spelling) in its errors never
// gets it printed in the agent's log or shown in its status.
import { mkdirSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
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

  it('masks the key it set from a credential wherever a service echoes it: log, status, metrics', async () => {
    // Its encoded and upper-cased spellings have no shape redaction knows: only its value masks them.
    const key = 'sk_test_agentCredential7xV2pL9sK4';
    const spellings = [
      key,
      key.toUpperCase(),
      Buffer.from(key).toString('base64'),
      Buffer.from(key).toString('hex'),
      Buffer.from(`user:${key}`).toString('base64'),
    ];
    const echo = createServer((req, res) => {
      const presented = String(req.headers['x-api-key'] ?? req.headers.authorization ?? '').replace(/^Bearer /, '');
      const b = Buffer.from(presented);
      res.writeHead(401, { 'content-type': 'application/json' });
      res.end(
        JSON.stringify({
          code: 'INVALID_API_KEY',
          error: `unknown key ${presented} (${presented.toUpperCase()}; b64 ${b.toString('base64')}; hex ${b.toString('hex')}; Basic ${Buffer.from(`user:${presented}`).toString('base64')})`,
        }),
      );
    });
    await new Promise<void>((resolve) => echo.listen(0, '127.0.0.1', resolve));
    const creds = path.join(f.root, 'credentials-echo');
    mkdirSync(creds, { mode: 0o700 });
    writeFileSync(path.join(creds, 'KMS_API_KEY'), `${key}\n`, { mode: 0o400 });
    try {
      const agent = await startAgent(f, ['--path', 'config', '--interval', '1h', '--mode', 'detect'], {
        ...({ KMS_API_KEY: undefined } as unknown as Record<string, string>),
        KMS_API_URL: `http://127.0.0.1:${(echo.address() as AddressInfo).port}/api/v1`,
        CREDENTIALS_DIRECTORY: creds,
      });
      const s = await until(agent, 'a reconcile against the echoing service', (x) => x.lastReconcile !== undefined);
      expect(s.lastReconcile.result).not.toBe('success');
      const shown = [agent.output(), JSON.stringify(s), (await agent.get('/')).text, await agent.metrics()].join('\n');
      agent.child.kill('SIGTERM');
      await agent.exit;
      for (const spelling of spellings) expect(shown, spelling).not.toContain(spelling);
      expect(shown).toContain('[REDACTED KMS_API_KEY]');
    } finally {
      echo.close();
    }
  });
});
