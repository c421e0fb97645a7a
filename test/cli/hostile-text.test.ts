// Issue 26, items 1 and 6 and two smaller ones, mounted against the built CLI and the emulator:
// - a configuration reading credentials with ${env:…} into metadata (refused; nothing leaks into
//   text, --json, Markdown, the PR comment, the step summary or a saved plan);
// - a credential arriving from the service inside a name (masked by value everywhere);
// - client names holding terminal escapes, bidi overrides, CR/LF and GitHub workflow commands
//   (escaped in plan, plan --prune, drift and apply output; no line starts with `::`);
// - `drift --gen-ignore` with a client named "zz\n**\n# " (never a `**` rule);
// - Markdown links and images in names (never rendered inside <code>);
// - a 70,000-character value (cut in the error line).
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { allOutput, RAW_KEY_PATTERN, runCli } from '../support/cli.js';
import { startGitHubFake, type GitHubFake } from '../support/github-fake.js';
import { setup, smallConfig, TEST_KEY, type Setup } from './helpers.js';

const TOKEN = 'ghs_' + 'Wf70k3n'.repeat(6);
const VAULT = 'hvs.' + 'V4ultT0k3n'.repeat(3);

let s: Setup;
let gh: GitHubFake;
let env: NodeJS.ProcessEnv;

/** Every credential of the run, as its raw value: none may appear in any output. */
const credentials = () => [TEST_KEY, TOKEN, VAULT];

function noCredential(text: string, where: string) {
  for (const c of credentials()) {
    // `::add-mask::` lines register values with the Actions runner, which never shows them.
    const line = text.split('\n').find((l) => l.includes(c) && !l.startsWith('::add-mask::'));
    expect(line === undefined, `${where} holds a credential: ${line?.replaceAll(c, '<RAW>').slice(0, 300)}`).toBe(true);
  }
}

const api = async (method: string, route: string, body?: unknown) => {
  const r = await fetch(`${s.emu.url}${route}`, {
    method,
    headers: { 'x-api-key': TEST_KEY, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await r.text();
  if (!r.ok) throw new Error(`${method} ${route}: ${r.status} ${text.slice(0, 300)}`);
  return text ? JSON.parse(text) : null;
};

async function addClient(name: string) {
  const templates = await api('GET', '/client/templates?project_env=shop-staging');
  const std = (templates.data as { id: string; name: string }[]).find((t) => t.name === 'std')!;
  await api('POST', '/client?project_env=shop-staging', { name, templateId: std.id });
}

async function removeClient(name: string) {
  const list = await api('GET', '/client?project_env=shop-staging&limit=100');
  for (const c of list.data as { id: string; name: string }[])
    if (c.name === name) await api('DELETE', `/client/${c.id}?project_env=shop-staging`);
}

beforeAll(async () => {
  s = await setup();
  gh = await startGitHubFake({ owner: 'acme', repo: 'access', token: TOKEN });
  writeFileSync(
    path.join(s.dir, 'event.json'),
    JSON.stringify({ action: 'synchronize', number: 7, pull_request: { number: 7 } }),
  );
  env = {
    ...s.env,
    VAULT_TOKEN: VAULT,
    GITHUB_ACTIONS: 'true',
    GITHUB_TOKEN: TOKEN,
    GITHUB_REPOSITORY: 'acme/access',
    GITHUB_EVENT_PATH: path.join(s.dir, 'event.json'),
    GITHUB_API_URL: gh.url,
    GITHUB_STEP_SUMMARY: path.join(s.dir, 'summary.md'),
  };
  const first = await runCli(['apply', '--yes'], { cwd: s.dir, env: s.env });
  expect(first.code, first.stderr).toBe(0);
});

afterAll(async () => {
  await gh?.close();
  await s?.emu.close();
  for (const text of allOutput) {
    expect(text).not.toMatch(RAW_KEY_PATTERN);
    noCredential(text, 'a CLI output');
  }
  rmSync(s.dir, { recursive: true, force: true });
});

describe('credentials in a configuration (issue 26, item 1)', () => {
  const hostile = smallConfig.replace(
    'clients: [{ name: web, template: std, keys: [{ name: main }] },',
    'clients: [{ name: web, template: std, metadata: { b: "x${env:KMS_API_KEY}", c: "${env:GITHUB_TOKEN}", d: "${env:LOOKS_HARMLESS}" }, keys: [{ name: main }] },',
  );

  it('refuses ${env:} of credential variables, naming file:line and the variable, in every format, and nothing leaks', async () => {
    expect(hostile).not.toBe(smallConfig);
    writeFileSync(path.join(s.dir, 'hostile.yaml'), hostile);
    // A harmless-looking name holding a copy of the project key is refused by its value.
    // Listed in the operator policy: credentials are refused even then (the credential check comes after the allowlist).
    const e = {
      ...env,
      LOOKS_HARMLESS: `copy-${TEST_KEY}`,
      KMS_SYNC_ENV_ALLOW: 'KMS_API_KEY,GITHUB_TOKEN,LOOKS_HARMLESS',
    };
    for (const args of [
      ['plan', '-f', 'hostile.yaml'],
      ['plan', '-f', 'hostile.yaml', '--format', 'markdown'],
      ['plan', '-f', 'hostile.yaml', '--json'],
      ['plan', '-f', 'hostile.yaml', '--comment', 'github'],
      ['plan', '-f', 'hostile.yaml', '--out', 'saved.json'],
    ]) {
      const r = await runCli(args, { cwd: s.dir, env: e });
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr).toMatch(
        /hostile\.yaml:9:\d+: .*environment variable KMS_API_KEY holds a credential \(its name marks a credential\)/,
      );
      expect(r.stderr).toMatch(/hostile\.yaml:9:\d+: .*environment variable GITHUB_TOKEN holds a credential/);
      expect(r.stderr).toMatch(
        /environment variable LOOKS_HARMLESS holds a credential \(its value holds a credential\)/,
      );
      noCredential(r.stdout + r.stderr, args.join(' '));
    }
    expect(gh.comments).toHaveLength(0);
    expect(existsSync(path.join(s.dir, 'saved.json'))).toBe(false);
    if (existsSync(env.GITHUB_STEP_SUMMARY!))
      noCredential(readFileSync(env.GITHUB_STEP_SUMMARY!, 'utf8'), 'the step summary');
    rmSync(path.join(s.dir, 'hostile.yaml'));
  });

  it('masks a credential arriving from the service inside a name, by value, in every output', async () => {
    const name = `leak-x${TEST_KEY}y-${TOKEN.slice(0, 40)}`;
    // The token is longer than a name may be: the service holds its first 40 characters, which
    // are not the token; the whole project key is inside the name.
    await addClient(name);
    try {
      const outputs: string[] = [];
      for (const args of [
        ['plan', '--prune'],
        ['plan', '--prune', '--json'],
        ['plan', '--prune', '--format', 'markdown'],
        ['plan', '--prune', '--comment', 'github'],
        ['plan', '--prune', '--out', 'saved.json'],
        ['drift'],
        ['drift', '--format', 'json'],
      ]) {
        const r = await runCli(args, { cwd: s.dir, env });
        expect([0, 2], `${args.join(' ')}: ${r.stderr}`).toContain(r.code);
        outputs.push(r.stdout, r.stderr);
      }
      const saved = readFileSync(path.join(s.dir, 'saved.json'), 'utf8');
      const comment = gh.comments.map((c) => c.body).join('\n');
      const summary = readFileSync(env.GITHUB_STEP_SUMMARY!, 'utf8');
      for (const [where, text] of [
        ['outputs', outputs.join('\n')],
        ['saved plan', saved],
        ['comment', comment],
        ['step summary', summary],
      ] as const) {
        noCredential(text, where);
        expect(text, where).toContain('[REDACTED KMS_API_KEY]');
      }
      rmSync(path.join(s.dir, 'saved.json'));
    } finally {
      await removeClient(name);
    }
  });
});

describe('hostile names from the service (issue 26, item 6)', () => {
  const names = [
    'title\x1b]0;pwned\x07',
    'erase\x1b[2K\rok',
    'red\x1b[31mflag',
    'bidi\u202egnp.exe',
    'c1\u009b2J',
    'wf\n::error title=pwned::fake failure',
    'mask\n::add-mask::kms-sync',
    'old ##[error]style',
  ];
  /** What may not reach a terminal or CI log raw. */
  function clean(text: string, where: string) {
    expect(text, where).not.toMatch(/[\x07\x9b\u202e]/);
    expect(text, where).not.toMatch(/\x1b(?!\[[0-9;]*m)/); // only colour, and none of it comes from names
    expect(text, where).not.toMatch(/\r(?!\x1b\[2K)/);
    for (const line of text.split('\n')) expect(line, where).not.toMatch(/^\s*::/);
    expect(text, where).not.toContain('##[');
    expect(text, where).not.toContain('red\x1b');
  }

  beforeAll(async () => {
    for (const n of names) await addClient(n);
  });
  afterAll(async () => {
    for (const n of names) await removeClient(n);
  });

  it('escapes them in plan, plan --prune and drift output, and no line starts a workflow command', async () => {
    for (const args of [
      ['plan'],
      ['plan', '--prune'],
      ['plan', '--prune', '--compact'],
      ['drift'],
      ['drift', '--format', 'markdown'],
      ['plan', '--prune', '--format', 'markdown'],
    ]) {
      const r = await runCli(args, { cwd: s.dir, env: { ...s.env, FORCE_COLOR: '1' } });
      expect([0, 2], `${args.join(' ')}: ${r.stderr}`).toContain(r.code);
      clean(r.stdout + r.stderr, args.join(' '));
      if (args.includes('markdown')) {
        expect(r.stdout).toContain('<code>client.shop-staging/wf⏎::error title=pwned::fake failure</code>');
        expect(r.stdout).toContain('<code>client.shop-staging/title&#92;u001b]0;pwned&#92;u0007</code>');
      } else if (!args.includes('--compact')) {
        expect(r.stdout).toContain('client.shop-staging/wf\\n::error title=pwned::fake failure');
        expect(r.stdout).toContain('title\\u001b]0;pwned\\u0007');
        expect(r.stdout).toContain('bidi\\u202egnp.exe');
      }
    }
  });

  it('export writes them double-quoted: safe to print, and they read back the same', async () => {
    const r = await runCli(['export', '--env', 'shop-staging'], { cwd: s.dir, env: s.env });
    expect(r.code, r.stderr).toBe(0);
    clean(r.stdout + r.stderr, 'export');
    const back = parseYaml(r.stdout) as { projects: { environments: { clients?: { name: string }[] }[] }[] };
    const exported = back.projects.flatMap((p) => p.environments.flatMap((e) => (e.clients ?? []).map((c) => c.name)));
    for (const n of names) expect(exported).toContain(n);
  });

  it('escapes them in apply --prune output', async () => {
    const r = await runCli(['apply', '--prune', '--yes'], { cwd: s.dir, env: s.env });
    expect(r.code, r.stderr).toBe(0);
    clean(r.stdout + r.stderr, 'apply --prune');
    expect(r.stdout).toContain('client.shop-staging/erase\\u001b[2K\\rok');
    for (const n of names) await addClient(n); // back for the other tests
  });
});

describe('drift --gen-ignore (issue 26, item 6)', () => {
  const name = 'zz\n**\n# ';
  beforeAll(() => addClient(name));
  afterAll(() => removeClient(name));

  it('never writes a name it cannot write as a safe rule, says so, and exits 1', async () => {
    await addClient('by-hand');
    try {
      const r = await runCli(['drift', '--gen-ignore'], { cwd: s.dir, env: s.env });
      expect(r.code, r.stderr).toBe(1);
      expect(r.stderr).toContain(
        'Not written to .kmsignore: "client.shop-staging/zz\\n**\\n# " cannot be written as an ignore rule',
      );
      const file = path.join(s.dir, '.kmsignore');
      const text = readFileSync(file, 'utf8');
      const rules = text
        .split('\n')
        .map((l) => l.replace(/(^|\s)#.*$/, '').trim())
        .filter(Boolean);
      expect(rules).toEqual(['client.shop-staging/by-hand']);
      // The drift the hostile name would have hidden is still reported.
      const again = await runCli(['drift'], { cwd: s.dir, env: s.env });
      expect(again.code).toBe(2);
      expect(again.stdout).toContain('client.shop-staging/zz\\n**\\n# ');
      rmSync(file);
    } finally {
      await removeClient('by-hand');
    }
  });
});

describe('Markdown reports (issue 26, smaller item)', () => {
  const names = ['[click here](https://evil.example/x)', '![](https://tracker.example/p.png)', 'see www.evil.example'];
  beforeAll(async () => {
    for (const n of names) await addClient(n);
  });
  afterAll(async () => {
    for (const n of names) await removeClient(n);
  });

  it('no link, image or autolink renders inside <code>', async () => {
    for (const args of [
      ['drift', '--format', 'markdown'],
      ['plan', '--prune', '--format', 'markdown'],
    ]) {
      const r = await runCli(args, { cwd: s.dir, env: s.env });
      expect([0, 2], r.stderr).toContain(r.code);
      expect(r.stdout).toContain('<code>client.shop-staging/[click here&#93;(https&#58;//evil.example/x)</code>');
      expect(r.stdout).not.toMatch(/\]\(|!\[|https:\/\/(evil|tracker)|www\.evil/);
    }
  });
});

describe('long values in error lines (issue 26, smaller item)', () => {
  it('cuts a 70,000-character value to 200 characters and says how many more', async () => {
    const big = 'x'.repeat(70_000);
    writeFileSync(
      path.join(s.dir, 'big.yaml'),
      smallConfig.replace(
        '{ name: web, template: std,',
        `{ name: web, template: std, ipWhitelist: ["${big}"], metadata: { a: "${big}" },`,
      ),
    );
    const r = await runCli(['plan', '-f', 'big.yaml'], { cwd: s.dir, env: s.env });
    expect(r.code).toBe(1);
    const line = r.stderr.split('\n').find((l) => l.includes('invalid IP address'))!;
    expect(line).toContain(`"${'x'.repeat(200)}…" (69800 more)`);
    expect(line.length).toBeLessThan(400);
    expect(r.stderr.length).toBeLessThan(2000);
    rmSync(path.join(s.dir, 'big.yaml'));
  });
});
