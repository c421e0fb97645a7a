// Issue 39 item 1: the kms-sync command as one file per platform, made by `npm run
// package:provider -- --cli` with the provider's machinery (a Node.js single executable application
// on the pinned Node.js binary). Built here for linux_amd64 and run with no node on PATH: its
// version and the third-party notices beside it, init (the schema copy comes from inside it), apply of examples/acme against the emulator
// into the default store, then a plan with no changes; the agent, which it leaves out, says so.
// Like test/provider/package.test.ts, it skips (loudly) where the pinned binary cannot be had.
import { execFile } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { RAW_KEY_PATTERN, repoRoot, workspace } from '../support/cli.js';
import { skipTest, skipWhen } from '../support/skip.js';
import { patient } from '../support/patience.js';

const VERSION = (JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version;
const HERE = process.platform === 'linux' && process.arch === 'x64';
const API_KEY = 'sk_test_singlefile0123456789';
let root: string;
let exe: string;
let skipped: string | undefined;
let emu: RunningEmulator | undefined;
const outputs: string[] = [];

function run(
  cmd: string,
  args: string[],
  opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      cmd,
      args,
      { cwd: opts.cwd ?? repoRoot, env: opts.env ?? process.env, maxBuffer: 64 * 1024 * 1024 },
      (e, stdout, stderr) => {
        outputs.push(stdout, stderr);
        resolve({ code: e ? Number((e as { code?: number }).code ?? 1) : 0, stdout, stderr });
      },
    );
  });
}

beforeAll(async () => {
  if (!HERE) return;
  root = workspace();
  const r = await run(process.execPath, [
    path.join(repoRoot, 'scripts', 'package-provider.js'),
    '--cli',
    '--out',
    path.join(root, 'release'),
    '--platforms',
    'linux_amd64',
  ]);
  if (r.code !== 0 && /cannot fetch .* from the npm registry|npm (ERR|error)|binaries are pinned at/.test(r.stderr)) {
    skipped = r.stderr.trim().split('\n')[0];
    process.stderr.write(
      `SKIPPED: test/cli/single-executable.test.ts: no pinned Node.js binary for this build: ${skipped}\n`,
    );
    return;
  }
  expect(r.code, `${r.stdout}\n${r.stderr}`).toBe(0);
  exe = path.join(root, 'release', `kms-sync_${VERSION}_linux_amd64`);
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
}, patient(300_000));

afterAll(async () => {
  await emu?.close();
  for (const o of outputs) expect(o).not.toMatch(RAW_KEY_PATTERN);
});

describe.skipIf(
  skipWhen(!HERE, 'test/cli/single-executable.test.ts: the linux_amd64 executable runs only on linux x64'),
)('the single-file kms-sync', () => {
  it('runs without Node.js: version, init, apply of examples/acme, then a plan with no changes; the agent says it is left out', async (ctx) => {
    if (skipped) return skipTest(ctx, `test/cli/single-executable.test.ts: ${skipped}`);
    const noNode = path.join(root, 'no-node-bin');
    mkdirSync(noNode, { recursive: true });
    const env = {
      PATH: noNode,
      HOME: root,
      KMS_API_URL: emu!.url,
      KMS_API_KEY: API_KEY,
      NODE_DISABLE_COMPILE_CACHE: '1',
    };
    const version = await run(exe, ['--version'], { env });
    expect(version.stdout.trim()).toBe(VERSION);
    // The notices of what is inside it go beside it: Node.js's license and the bundled packages'.
    const notices = readFileSync(path.join(root, 'release', `kms-sync_${VERSION}_THIRD_PARTY_NOTICES.txt`), 'utf8');
    expect(notices).toMatch(/^kms-sync \S+ includes the third-party software below\./);
    expect(notices).toContain('Node.js is licensed for use as follows:');
    for (const pkg of ['commander', 'yaml', 'ajv'])
      expect(notices).toContain(readFileSync(path.join(repoRoot, 'node_modules', pkg, 'LICENSE'), 'utf8').trimEnd());

    const fresh = path.join(root, 'fresh');
    mkdirSync(fresh);
    expect((await run(exe, ['init'], { cwd: fresh, env })).code).toBe(0);
    expect(existsSync(path.join(fresh, 'kms-sync.schema.json'))).toBe(true);
    expect(readFileSync(path.join(fresh, '.gitignore'), 'utf8')).toContain('core');

    const conf = path.join(root, 'acme');
    cpSync(path.join(repoRoot, 'examples', 'acme'), conf, { recursive: true });
    const apply = await run(exe, ['apply', '-f', '.', '--auto-approve'], { cwd: conf, env });
    expect(apply.code, apply.stderr).toBe(0);
    expect(existsSync(path.join(conf, '.kms-sync', 'secrets.sops.yaml'))).toBe(true);
    const plan = await run(exe, ['plan', '-f', '.', '--detailed-exitcode'], { cwd: conf, env });
    expect(plan.code, `${plan.stdout}\n${plan.stderr}`).toBe(0);
    expect(plan.stdout).toContain('No changes.');

    const agent = await run(
      exe,
      [
        'agent',
        '--repo',
        'file:///nowhere',
        '--path',
        '.',
        '--state-dir',
        path.join(root, 'state'),
        '--listen',
        '127.0.0.1:0',
      ],
      { env },
    );
    expect(agent.code).toBe(1);
    expect(agent.stderr).toContain(
      'the single-file kms-sync does not include fs-native-extensions, which the agent (kms-sync agent) needs',
    );
  });
});
