// Starting the emulator on a bad `--data` file or a bad port: a message naming the file (or port)
// and what is wrong, a refusal to start, and the file left exactly as it was. Never a half-read state.
import { createServer, type Server } from 'node:net';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DataFileError, EmulatorStartError, startEmulator } from '../../src/emulator/index.js';
import { runCli } from '../support/cli.js';
import { scratchDir } from '../support/scratch.js';

const API_KEY = 'sk_test_startup';
let dir: string;
/** A complete state file: one project, one template, one client with a key, one endpoint, one log. */
let good: string;

beforeAll(async () => {
  dir = scratchDir('kms-startup-');
  const file = join(dir, 'good.json');
  const emu = await startEmulator({ port: 0, apiKeys: [API_KEY], dataFile: file });
  const call = (method: string, path: string, body?: unknown) =>
    fetch(`${emu.url}${path}`, {
      method,
      headers: { 'x-api-key': API_KEY, 'content-type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    }).then((r) => r.json() as Promise<unknown>);
  try {
    await call('POST', '/project', {
      slug: 'st',
      name: 'S',
      envs: [{ type: 'production', url: 'https://s.example', templates: [{ name: 't', rateLimitDay: 5 }] }],
    });
    const templateId = (
      (await call('GET', '/client/templates?project_env=st-production')) as { data: { id: string }[] }
    ).data[0]!.id;
    const client = (await call('POST', '/client?project_env=st-production', {
      name: 'c',
      templateId,
      keys: [{ name: 'k' }],
    })) as { id: string };
    await call('POST', '/endpoint?project_env=st-production', { method: 'GET', path: '/x' });
    await call('POST', `/client/${client.id}?project_env=st-production&method_path=GET:/x`, { name: 'k' });
  } finally {
    await emu.close();
  }
  good = readFileSync(file, 'utf8');
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Writes `content` to a fresh file, starts the emulator on it, and returns the refusal. */
async function refusal(name: string, content: string | Buffer): Promise<{ error: Error; file: string }> {
  const file = join(dir, name);
  writeFileSync(file, content);
  const error = await startEmulator({ port: 0, apiKeys: [API_KEY], dataFile: file }).then(
    async (emu) => {
      await emu.close();
      throw new Error(`the emulator started on ${name}`);
    },
    (e: Error) => e,
  );
  // Refused before anything was written.
  expect(readFileSync(file).equals(Buffer.from(content))).toBe(true);
  return { error, file };
}

const edit = (mutate: (state: Record<string, any>) => void) => {
  // eslint-disable-line @typescript-eslint/no-explicit-any
  const saved = JSON.parse(good);
  mutate(saved);
  return JSON.stringify(saved);
};

describe('--data file', () => {
  it('the good file starts, with its state', async () => {
    const file = join(dir, 'copy.json');
    writeFileSync(file, good);
    const emu = await startEmulator({ port: 0, apiKeys: [API_KEY], dataFile: file });
    try {
      const res = await fetch(`${emu.url}/client?project_env=st-production`, { headers: { 'x-api-key': API_KEY } });
      expect(((await res.json()) as { data: { name: string }[] }).data.map((c) => c.name)).toEqual(['c']);
    } finally {
      await emu.close();
    }
  });

  const cases: [string, () => string | Buffer, RegExp][] = [
    [
      'truncated mid-file',
      () => good.slice(0, Math.floor(good.length / 2)),
      /ends before its JSON is complete .*truncated/,
    ],
    ['truncated to one byte', () => '{', /ends before its JSON is complete/],
    ['empty', () => '', /is empty/],
    ['not JSON', () => 'version: 1\nstate: {}\n', /is not valid JSON/],
    [
      'JSON with an error on line 3',
      () => '{\n  "version": 1,\n  "state" {}\n}',
      /is not valid JSON at line 3, column 11/,
    ],
    ['not UTF-8', () => Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), /is not UTF-8 text/],
    ['an empty object', () => '{}', /is not an emulator state: \$\.version: is required/],
    ['null', () => 'null', /is not an emulator state: \$: must be a JSON object, got null/],
    [
      'another version',
      () =>
        edit((s) => {
          s.version = 2;
        }),
      /\$\.version: must be <= 1/,
    ],
    [
      'state without projects',
      () =>
        edit((s) => {
          s.state = {};
        }),
      /\$\.state\.projects: is required/,
    ],
    [
      'a project without envs',
      () =>
        edit((s) => {
          delete s.state.projects[0].envs;
        }),
      /\$\.state\.projects\[0\]\.envs: is required/,
    ],
    [
      'a client of the wrong type',
      () =>
        edit((s) => {
          s.state.projects[0].envs[0].clients[0] = 'c';
        }),
      /\$\.state\.projects\[0\]\.envs\[0\]\.clients\[0\]: must be object, got string/,
    ],
    [
      'a key hash that is not SHA-256',
      () =>
        edit((s) => {
          s.state.projects[0].envs[0].clients[0].keys[0].hash = 'raw';
        }),
      /keys\[0\]\.hash: "raw" is not valid \(a SHA-256 in hex\)/,
    ],
    [
      'an unknown field',
      () =>
        edit((s) => {
          s.state.projects[0].extra = 1;
        }),
      /\$\.state\.projects\[0\]\.extra: unknown field/,
    ],
    [
      'a client of a missing template',
      () =>
        edit((s) => {
          s.state.projects[0].envs[0].clients[0].templateId = 'gone';
        }),
      /clients\[0\]\.templateId: template 'gone' is not in st-production/,
    ],
    [
      'a project listed twice',
      () =>
        edit((s) => {
          s.state.projects.push(s.state.projects[0]);
        }),
      /\$\.state\.projects\[1\]\.slug: project 'st' appears twice/,
    ],
    [
      'an environment of another project',
      () =>
        edit((s) => {
          s.state.projects[0].envs[0].project = 'other';
        }),
      /envs\[0\]\.project: is 'other' inside project 'st'/,
    ],
    [
      'a server key that is not a key',
      () =>
        edit((s) => {
          s.serverKey = 'bm90IGEga2V5';
        }),
      /\$\.serverKey: is not an X25519 private key/,
    ],
  ];
  for (const [what, content, message] of cases) {
    it(`refuses a file that is ${what}, naming the file`, async () => {
      const name = `${what.replace(/\W+/g, '-')}.json`;
      const { error, file } = await refusal(name, content());
      expect(error).toBeInstanceOf(DataFileError);
      expect(error.message).toContain(`--data file ${file}:`);
      expect(error.message).toMatch(message);
      expect(error.message).toMatch(/did not start/);
    });
  }

  it('refuses a folder, and a file it cannot create', async () => {
    const folder = join(dir, 'a-folder');
    mkdirSync(folder);
    await expect(startEmulator({ port: 0, apiKeys: [API_KEY], dataFile: folder })).rejects.toThrow(/is a directory/);
    await expect(
      startEmulator({ port: 0, apiKeys: [API_KEY], dataFile: join(dir, 'missing', 'state.json') }),
    ).rejects.toThrow(/cannot write --data file .*missing\/state\.json: its folder .* does not exist/);
  });

  it('the command names the file and exits 1, without a stack trace', async () => {
    const file = join(dir, 'cli-truncated.json');
    writeFileSync(file, good.slice(0, 100));
    const res = await runCli(['emulator', '--port', '0', '--data', file], { env: { KMS_EMULATOR_API_KEY: API_KEY } });
    expect(res.code).toBe(1);
    expect(res.stderr).toContain(`--data file ${file}: ends before its JSON is complete`);
    expect(res.stderr).not.toMatch(/\n\s+at |SyntaxError|Unexpected end of JSON input/);
    expect(res.stdout).not.toContain('listening');
  });
});

describe('ports', () => {
  let busy: Server;
  let busyPort: number;
  beforeAll(async () => {
    busy = createServer();
    await new Promise<void>((ok) => busy.listen(0, '127.0.0.1', ok));
    busyPort = (busy.address() as { port: number }).port;
  });
  afterAll(() => new Promise<void>((ok) => busy.close(() => ok())));

  it("--port 99999 gets our own message, not Node's", async () => {
    const res = await runCli(['emulator', '--port', '99999'], { env: { KMS_EMULATOR_API_KEY: API_KEY } });
    expect(res.code).toBe(1);
    expect(res.stderr).toContain('a port is an integer from 0 to 65535 (0 picks a free one), got 99999');
    expect(res.stderr).not.toMatch(/RangeError|ERR_SOCKET_BAD_PORT|should be >= 0/);
    await expect(startEmulator({ port: 99999, apiKeys: [API_KEY] })).rejects.toThrow(EmulatorStartError);
    await expect(startEmulator({ port: 1.5, apiKeys: [API_KEY] })).rejects.toThrow(
      /port must be an integer from 0 to 65535/,
    );
  });

  it('a port in use is named, with what to do', async () => {
    const res = await runCli(['emulator', '--port', String(busyPort)], { env: { KMS_EMULATOR_API_KEY: API_KEY } });
    expect(res.code).toBe(1);
    expect(res.stderr).toContain(
      `port ${busyPort} is already in use on 127.0.0.1: pick another --port, or --port 0 for a free one`,
    );
    expect(res.stderr).not.toMatch(/EADDRINUSE|\n\s+at /);
  });
});
