// Issue 26, the attacks of another local user and of an edited saved plan, mounted against the
// built CLI: the compile cache (item 2), saved plans and the files and folders kms-sync makes
// (item 4). "Another user" is modelled by what they could do: a folder others may write, names
// pre-created in a shared folder, a plan file edited to name another service.
import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { cliPath, runCli, workspace, type CliResult } from '../support/cli.js';
import { setup, type Setup } from './helpers.js';

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0)) await c();
});
const scratch = (files: Record<string, string> = {}) => {
  const dir = workspace(files);
  cleanup.push(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
};
const modeOf = (p: string) => statSync(p).mode & 0o777;

/** The built CLI under umask 000 (what a careless CI image or a shared account may have). */
function runUmask000(args: string[], opts: { env?: NodeJS.ProcessEnv; cwd?: string } = {}): Promise<CliResult> {
  return new Promise((resolve) => {
    execFile(
      '/bin/sh',
      ['-c', 'umask 000; exec "$0" "$@"', process.execPath, cliPath, ...args],
      {
        cwd: opts.cwd,
        env: { PATH: process.env.PATH, HOME: process.env.HOME, NO_COLOR: '1', ...opts.env },
      },
      (error, stdout, stderr) =>
        resolve({ code: error ? Number((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** Every file and folder under `dir` (relative), with its mode. */
const modesUnder = (dir: string) =>
  readdirSync(dir, { recursive: true, withFileTypes: true })
    .map((e) => path.join(e.parentPath, e.name))
    .map((p) => [path.relative(dir, p), modeOf(p)] as const);

describe('the compile cache (issue 26 item 2)', () => {
  it('a ~/.cache that is a symbolic link to a private folder is followed, not refused', async () => {
    const home = scratch();
    const real = path.join(home, 'elsewhere');
    mkdirSync(real, { mode: 0o700 });
    symlinkSync(real, path.join(home, '.cache'));
    const r = await runCli(['--version'], { env: { HOME: home } });
    expect(r.code).toBe(0);
    expect(r.stderr).toBe('');
    expect(readdirSync(path.join(real, 'kms-sync', 'node-compile-cache')).length).toBe(1);
  });

  it('is created private under umask 000: every folder 0700, no file others may read', async () => {
    const home = scratch();
    const r = await runUmask000(['--version'], { env: { HOME: home } });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toBe('');
    const cache = path.join(home, '.cache');
    const entries = modesUnder(cache);
    expect(entries.length).toBeGreaterThan(3);
    for (const [p, mode] of entries) expect([p, mode & 0o077]).toEqual([p, 0]);
    expect(modeOf(path.join(cache, 'kms-sync', 'node-compile-cache'))).toBe(0o700);
  });

  it('is not used when another user could write it (a folder left 0777): one notice, nothing read or written there', async () => {
    const home = scratch();
    const dir = path.join(home, '.cache', 'kms-sync', 'node-compile-cache');
    mkdirSync(dir, { recursive: true });
    chmodSync(dir, 0o777);
    const r = await runCli(['--version'], { env: { HOME: home } });
    expect(r.code).toBe(0);
    expect(r.stdout.trim()).toBe('0.1.0');
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.stderr).toMatch(
      /not using the compile cache: .*node-compile-cache is writable by other users \(mode 0777\)/,
    );
    expect(readdirSync(dir)).toEqual([]);
  });

  it('is not used when an entry in it could have been planted (a per-version folder others may write in a folder they may enter)', async () => {
    const home = scratch();
    const dir = path.join(home, '.cache', 'kms-sync', 'node-compile-cache');
    expect((await runCli(['--version'], { env: { HOME: home } })).code).toBe(0);
    const [version] = readdirSync(dir);
    chmodSync(dir, 0o755);
    chmodSync(path.join(dir, version!), 0o777);
    const r = await runCli(['--version'], { env: { HOME: home } });
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/not using the compile cache: .* is writable by other users \(mode 0777\)/);
  });
});

/** A server that logs every request it gets (the "other host" an edited plan points at). */
async function loggingServer(): Promise<{
  url: string;
  requests: { url: string; headers: IncomingHttpHeaders }[];
  server: Server;
}> {
  const requests: { url: string; headers: IncomingHttpHeaders }[] = [];
  const server = createServer((req, res) => {
    requests.push({ url: req.url ?? '', headers: req.headers });
    res.writeHead(404, { 'content-type': 'application/json' }).end('{"error":"nope"}');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  cleanup.push(() => new Promise((r) => server.close(r)));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/v1`, requests, server };
}

describe('saved plans (issue 26 item 4)', () => {
  let s: Setup;
  const init = async () => {
    s = await setup();
    cleanup.push(
      () => s.emu.close(),
      () => rmSync(s.dir, { recursive: true, force: true }),
    );
    return (args: string[], env: NodeJS.ProcessEnv = {}) =>
      runCli(args, { env: { ...s.env, KMS_SYNC_ALLOW_LOCAL_STORE: '1', ...env }, cwd: s.dir });
  };

  it('apply plan.json talks to the service KMS_API_URL names, never to the one written in the file', async () => {
    const cli = await init();
    expect((await cli(['plan', '-f', '.', '--out', 'plan.json'])).code).toBe(0);
    const other = await loggingServer();
    const file = path.join(s.dir, 'plan.json');
    const saved = JSON.parse(readFileSync(file, 'utf8'));
    saved.plan.target.url = other.url;
    writeFileSync(file, JSON.stringify(saved));

    // The environment still names the real service: refused, naming both, nothing sent anywhere.
    const r = await cli(['apply', 'plan.json', '--auto-approve']);
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain(`plan.json was made for ${other.url}, but KMS_API_URL / --url names ${s.emu.url}`);
    // No URL in the environment: the file's is not used.
    const none = await cli(['apply', 'plan.json', '--auto-approve'], { KMS_API_URL: '' });
    expect(none.code).not.toBe(0);
    expect(none.stderr).toContain('no service URL');
    expect(other.requests).toEqual([]);
  });

  it('names the services without their credentials, and the saved plan holds none', async () => {
    const cli = await init();
    const withSecret = s.emu.url.replace('http://', 'http://user:pa55word@') + '?token=qu3rysecret';
    const r = await cli(['plan', '-f', '.', '--out', 'plan.json'], { KMS_API_URL: withSecret });
    expect(r.code, r.stderr).toBe(0);
    const text = readFileSync(path.join(s.dir, 'plan.json'), 'utf8');
    for (const out of [text, r.stdout, r.stderr]) {
      expect(out).not.toContain('pa55word');
      expect(out).not.toContain('qu3rysecret');
    }
    expect(r.stdout).toContain(`Target: ${s.emu.url}\n`);
    const json = await cli(['plan', '-f', '.', '--json'], { KMS_API_URL: withSecret });
    expect(json.stdout).not.toMatch(/pa55word|qu3rysecret/);
    const other = await cli(['apply', 'plan.json', '--auto-approve'], {
      KMS_API_URL: 'http://me:0ther5ecret@127.0.0.1:9/api/v1',
    });
    expect(other.code).not.toBe(0);
    expect(other.stderr).toContain('names http://127.0.0.1:9/api/v1');
    expect(other.stderr).not.toMatch(/0ther5ecret|pa55word/);
    // The same service with other credentials in its URL is the same service.
    const same = await cli(['apply', 'plan.json', '--auto-approve'], { KMS_API_URL: s.emu.url });
    expect(same.code, same.stderr).toBe(0);
  });

  it('plan --out under umask 000 makes its folders 0700 and the plan 0600, through a temp file no one could pre-create', async () => {
    const cli = await init();
    const r = await runUmask000(['plan', '-f', '.', '--out', 'plans/deep/x.json'], { env: { ...s.env }, cwd: s.dir });
    expect(r.code, r.stderr).toBe(0);
    expect(modeOf(path.join(s.dir, 'plans'))).toBe(0o700);
    expect(modeOf(path.join(s.dir, 'plans', 'deep'))).toBe(0o700);
    expect(modeOf(path.join(s.dir, 'plans', 'deep', 'x.json'))).toBe(0o600);
    expect(readdirSync(path.join(s.dir, 'plans', 'deep'))).toEqual(['x.json']);
    void cli;
  });

  it('plan --out never writes through a temp name another user pre-created (the old <out>.<pid>.tmp)', async () => {
    await init();
    // `exec` keeps the shell's pid: the name the old code would open is known and planted first, 0666.
    const r = await new Promise<CliResult>((resolve) => {
      execFile(
        '/bin/sh',
        [
          '-c',
          'umask 000; printf planted > "x.json.$$.tmp"; exec "$0" "$@"',
          process.execPath,
          cliPath,
          'plan',
          '-f',
          '.',
          '--out',
          'x.json',
        ],
        {
          cwd: s.dir,
          env: { PATH: process.env.PATH, HOME: process.env.HOME, NO_COLOR: '1', ...s.env },
        },
        (error, stdout, stderr) => resolve({ code: error ? 1 : 0, stdout, stderr }),
      );
    });
    expect(r.code, r.stderr).toBe(0);
    expect(modeOf(path.join(s.dir, 'x.json'))).toBe(0o600);
    const planted = readdirSync(s.dir).filter((n) => n.endsWith('.tmp'));
    expect(planted).toHaveLength(1);
    expect(readFileSync(path.join(s.dir, planted[0]!), 'utf8')).toBe('planted');
  });
});

describe('configuration files kms-sync writes (issue 26 item 4)', () => {
  it('init under umask 000: the folder and the file are never writable by others', async () => {
    const dir = scratch();
    const r = await runUmask000(['init', 'conf/kms-sync.yaml'], { cwd: dir, env: { HOME: dir } });
    expect(r.code, r.stderr).toBe(0);
    expect(modeOf(path.join(dir, 'conf')) & 0o022).toBe(0);
    expect(modeOf(path.join(dir, 'conf', 'kms-sync.yaml')) & 0o022).toBe(0);
    expect(modeOf(path.join(dir, 'conf', '.gitignore')) & 0o022).toBe(0);
  });

  it("init keeps core dumps out of git (a killed run's memory can hold raw keys), and keeps the user's .gitignore", async () => {
    const dir = scratch();
    const r = await runCli(['init', 'conf/kms-sync.yaml'], { cwd: dir, env: { HOME: dir } });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('Wrote conf/.gitignore (a core dump of a killed run can hold raw keys)');
    const conf = path.join(dir, 'conf');
    execFileSync('git', ['init', '-q', conf]);
    mkdirSync(path.join(conf, 'teams', 'core'), { recursive: true });
    for (const f of ['core', 'core.4242', 'teams/core/team.yaml', 'core.yaml']) writeFileSync(path.join(conf, f), 'x');
    const ignored = (f: string) => {
      try {
        execFileSync('git', ['-C', conf, 'check-ignore', '-q', f]);
        return true;
      } catch {
        return false;
      }
    };
    expect(
      ['core', 'core.4242', 'teams/core/team.yaml', 'kms-sync.yaml', 'core.yaml'].map((f) => [f, ignored(f)]),
    ).toEqual([
      ['core', true],
      ['core.4242', true],
      ['teams/core/team.yaml', false],
      ['kms-sync.yaml', false],
      ['core.yaml', false],
    ]);

    const other = scratch();
    writeFileSync(path.join(other, '.gitignore'), 'node_modules/');
    const again = await runCli(['init'], { cwd: other, env: { HOME: other } });
    expect(again.code, again.stderr).toBe(0);
    expect(readFileSync(path.join(other, '.gitignore'), 'utf8')).toMatch(
      /^node_modules\/\n# Core dumps: .*\ncore\ncore\.\[0-9\]\*\n!core\/\n$/,
    );
  });
});
