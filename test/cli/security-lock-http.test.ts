// Issue 26 item 9, mounted against the built CLI: a run-lock record that does not parse, an answer
// too large to hold, URL credentials in what is shown, the emulator's key off the command line.
import { spawn } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { KmsClient } from '../../src/api/client.js';
import { lockPathFor } from '../../src/apply/run-lock.js';
import { cliPath, runCli, workspace } from '../support/cli.js';
import { startEndlessServer } from '../support/endless-server.js';
import { setup, TEST_KEY, type Setup } from './helpers.js';
import { patient } from '../support/patience.js';

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0)) await c();
});
async function world(): Promise<Setup> {
  const s = await setup();
  cleanup.push(
    () => s.emu.close(),
    () => rmSync(s.dir, { recursive: true, force: true }),
  );
  return s;
}

describe('run lock records', () => {
  it('a lock record whose expiresAt does not parse ("soon") is treated as expired and reported, not a lock forever', async () => {
    const s = await world();
    const cli = (args: string[]) => runCli(args, { env: s.env, cwd: s.dir });
    const first = await cli(['apply', '-f', '.', '--auto-approve']);
    expect(first.code, first.stderr).toBe(0);
    const owner = JSON.parse((await cli(['plan', '-f', '.', '--json'])).stdout).target.owner as string;
    const api = new KmsClient({ baseUrl: s.emu.url, apiKey: TEST_KEY, parallelism: 1 });
    cleanup.push(() => api.close());
    await api.createEndpoints('shop-staging', [
      {
        method: 'POST',
        path: lockPathFor(owner),
        name: 'kms-sync run lock',
        description: 'planted',
        metadata: {
          owner,
          holder: 'mallory',
          host: 'elsewhere',
          pid: 1,
          acquiredAt: '2026-01-01T00:00:00Z',
          expiresAt: 'soon',
        },
      },
    ]);
    const r = await cli(['apply', '-f', '.', '--auto-approve']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain('Breaking the run lock of shop-staging: its record does not parse (expiresAt "soon"');
  });
});

/** A "service" whose every answer is endless JSON (chunked), or claims 700 MB in content-length. */
async function hugeAnswers(declared: boolean) {
  const server = await startEndlessServer({
    chunk: Buffer.from(`{"name":"${'x'.repeat(1000)}"},`.repeat(1000)),
    prefix: '{"data":[',
    ...(declared ? { headers: { 'content-length': String(700 * 1024 * 1024) } } : {}),
  });
  cleanup.push(server.close);
  return { url: `http://127.0.0.1:${server.port}/api/v1`, sent: server.sent };
}

describe('answer sizes are bounded', () => {
  for (const declared of [false, true]) {
    it(
      `a 700 MB answer (${declared ? 'declared in content-length' : 'streamed'}) fails cleanly at 64 MB: a clear error, no stack trace, no crash`,
      async () => {
        const s = await world();
        const huge = await hugeAnswers(declared);
        const r = await runCli(['plan', '-f', '.'], { env: { ...s.env, KMS_API_URL: huge.url }, cwd: s.dir });
        expect(r.code).toBe(1);
        expect(r.stderr).toMatch(
          /the answer is larger than 64 MB, the most kms-sync reads of one answer; stopped reading it \(not retried\)/,
        );
        expect(r.stderr).not.toMatch(/\n\s+at /);
        expect(huge.sent()).toBeLessThan(200 * 1024 * 1024);
      },
      patient(30_000),
    );
  }
});

/** Starts `kms-sync emulator` with `args`/`env`; resolves with its URL and pid once it listens. */
function startEmulatorCli(args: string[], env: NodeJS.ProcessEnv): Promise<{ url: string; pid: number }> {
  const child = spawn(process.execPath, [cliPath, 'emulator', '--port', '0', ...args], {
    env: { PATH: process.env.PATH, HOME: process.env.HOME, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  cleanup.push(
    () =>
      new Promise((r) => {
        if (child.exitCode !== null || child.signalCode !== null) return r(undefined);
        child.once('exit', r);
        child.kill('SIGTERM');
      }),
  );
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on (\S+)/.exec(out);
      if (m) resolve({ url: m[1]!, pid: child.pid! });
    });
    child.once('exit', (code) => reject(new Error(`emulator exited ${code}`)));
  });
}

describe('the emulator key stays out of ps', () => {
  const KEY = 'sk_test_' + 'Emul4torK3y'.repeat(2);
  for (const how of ['file', 'env'] as const) {
    it(`reads its key from ${how === 'file' ? '--api-key-file' : 'KMS_EMULATOR_API_KEY'}: the command line holds no key, and the key works`, async () => {
      const dir = workspace({ 'key.txt': `# the emulator's key\n${KEY}\n` });
      cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
      const emu = await startEmulatorCli(
        how === 'file' ? ['--api-key-file', `${dir}/key.txt`] : [],
        how === 'env' ? { KMS_EMULATOR_API_KEY: KEY } : {},
      );
      if (process.platform === 'linux')
        expect(readFileSync(`/proc/${emu.pid}/cmdline`, 'utf8')).not.toContain('sk_test_');
      expect((await fetch(`${emu.url}/project`, { headers: { 'x-api-key': KEY } })).status).toBe(200);
      expect((await fetch(`${emu.url}/project`, { headers: { 'x-api-key': 'sk_test_wrongwrongwrong' } })).status).toBe(
        401,
      );
    });
  }

  it('refuses --api-key (the key would show in ps) and says what to use instead', async () => {
    const r = await runCli(['emulator', '--port', '0', '--api-key', KEY], { env: { KMS_EMULATOR_API_KEY: KEY } });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('--api-key is no longer accepted: every local user sees a command line in ps');
    expect(r.stderr).toContain('KMS_EMULATOR_API_KEY');
    expect(r.stderr).not.toContain(KEY);
    expect(r.stdout).not.toContain('listening');
  });
});

describe('NODE_DEBUG=http', () => {
  it('prints no x-api-key: the key is set on the request, not in the options Node logs', async () => {
    const s = await world();
    const r = await runCli(['plan', '-f', '.'], { env: { ...s.env, NODE_DEBUG: 'http,net' }, cwd: s.dir });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/^HTTP \d+: /m); // Node's debug output is there
    expect(r.stdout + r.stderr).not.toContain(TEST_KEY);
  });
});
