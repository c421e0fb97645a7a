// From the terminal into the docs: every command's --help ends with its page (a file of the package
// and a heading that exists), and the errors users meet most name their troubleshooting entry;
// every docs/ page and #anchor that src/ names exists.
import { readdirSync, readFileSync, existsSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { type CliResult, repoRoot, runCli, workspace } from '../support/cli.js';
import { anchors } from './markdown.js';
import { patient } from '../support/patience.js';

const anchorCache = new Map<string, Set<string>>();
function anchorExists(file: string, anchor: string): boolean {
  if (!anchorCache.has(file)) anchorCache.set(file, anchors(readFileSync(file, 'utf8')));
  return anchorCache.get(file)!.has(anchor);
}

/** The entries of docs/troubleshooting.md the common errors must keep naming. */
const COMMON = [
  'connection-refused',
  'authentication-failed',
  'run-lock-held',
  'store-holds-another-services-secrets',
  'local-store-refused-in-ci',
  'owner-id-moved',
];

/** `kms-sync CMD --help`, run once per command in this file (the text is the same every time). */
const helps = new Map<string, Promise<CliResult>>();
function help(cmd: string[]): Promise<CliResult> {
  const key = cmd.join(' ');
  if (!helps.has(key)) helps.set(key, runCli([...cmd, '--help']));
  return helps.get(key)!;
}

/** Subcommands whose help must carry the sections every command's has (beside the commands themselves). */
const SECTIONED_SUBCOMMANDS = ['secrets list', 'secrets flush', 'secrets prune', 'report merge'];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return e.name === 'flavours' ? [] : sourceFiles(p); // generated bindings link the registry
    return e.name.endsWith('.ts') ? [p] : [];
  });
}

describe('--help ends with its docs page', () => {
  it(
    'for every command and subcommand, a file of the package and a heading of it; every command names the environment, exit codes and examples, without "(default: [])"',
    async () => {
      const top = await help([]);
      const names = [...top.stdout.slice(top.stdout.indexOf('Commands:')).matchAll(/^ {2}([a-z]+)\b/gm)]
        .map((m) => m[1]!)
        .filter((n) => n !== 'help');
      expect(names).toEqual(expect.arrayContaining(['plan', 'apply', 'drift', 'secrets', 'emulator', 'provider']));
      const problems: string[] = [];
      const subcommands = (help: string) =>
        help.includes('Commands:')
          ? [...help.slice(help.indexOf('Commands:')).matchAll(/^ {2}([a-z]+)\b/gm)]
              .map((m) => m[1]!)
              .filter((n) => n !== 'help')
          : [];
      const queue: string[][] = [[], ...names.map((n) => [n])];
      const seen: string[] = [];
      for (let cmd = queue.shift(); cmd; cmd = queue.shift()) {
        const r = await help(cmd);
        seen.push(cmd.join(' '));
        const what = `kms-sync ${[...cmd, '--help'].join(' ')}`;
        // The sections of a command's help (they were checked in test/cli/habits.test.ts, a second walk).
        if (cmd.length === 1 || SECTIONED_SUBCOMMANDS.includes(cmd.join(' '))) {
          expect(r.code, what).toBe(0);
          expect(r.stdout, what).toContain('Exit codes:');
          expect(r.stdout, what).toContain('Examples:');
          expect(r.stdout, what).not.toContain('(default: [])');
          if (['plan', 'apply', 'rotate', 'destroy', 'export', 'drift'].includes(cmd[0]!)) {
            expect(r.stdout, what).toContain('KMS_API_URL');
            expect(r.stdout, what).toContain('KMS_API_KEY');
          }
        }
        if (cmd.length === 1) queue.push(...subcommands(r.stdout).map((sub) => [...cmd!, sub]));
        const last = r.stdout.trimEnd().split('\n').at(-1)!;
        const m = /^Docs: (\/\S+?)(?:#([a-z0-9-]+))?$/.exec(last);
        if (!m) {
          problems.push(`${what}: last line is ${JSON.stringify(last)}`);
          continue;
        }
        const [, file, anchor] = m;
        if (!file!.startsWith(repoRoot + path.sep) || !existsSync(file!))
          problems.push(`${what}: ${file} is not a file of the package`);
        else if (anchor && !anchorExists(file!, anchor))
          problems.push(`${what}: no heading #${anchor} in ${path.relative(repoRoot, file!)}`);
      }
      expect(seen).toEqual(expect.arrayContaining([...SECTIONED_SUBCOMMANDS, 'provider install']));
      expect(seen).toEqual(
        expect.arrayContaining(['validate', 'init', 'schema', 'plan', 'apply', 'secrets', 'version', 'completion']),
      );
      expect(problems).toEqual([]);
    },
    patient(120_000),
  );
});

describe('--help lists what a command reads from the environment', () => {
  it(
    'apply, plan and secrets list name the age identity, CI and the store credentials; every name listed is read by src/',
    async () => {
      const sources = sourceFiles(path.join(repoRoot, 'src'))
        .map((f) => readFileSync(f, 'utf8'))
        .join('\n');
      const problems: string[] = [];
      for (const cmd of [['apply'], ['plan'], ['rotate'], ['drift'], ['validate'], ['secrets', 'list']]) {
        const text = (await help(cmd)).stdout;
        const env = text.slice(text.indexOf('Environment:'), text.indexOf('Exit codes:'));
        for (const name of new Set(env.match(/\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b|\bCI\b/g) ?? [])) {
          // Read by our code, or by a cloud SDK we hand the environment to (their chains: AWS_*, AZURE_*, GOOGLE_*).
          if (!sources.includes(name) && !/^(AWS|AZURE|GOOGLE)_/.test(name))
            problems.push(`${cmd.join(' ')} --help: ${name} is not read anywhere in src/`);
        }
        if (cmd[0] !== 'validate') expect(env, cmd.join(' ')).toContain('SOPS_AGE_KEY_FILE');
      }
      const apply = (await help(['apply'])).stdout;
      for (const name of ['CI ', 'VAULT_TOKEN', 'KMS_SYNC_ENV_ALLOW', 'KMS_SYNC_ALLOW_LOCAL_STORE', 'KMS_SYNC_TARGET'])
        expect(apply).toContain(name);
      expect(problems).toEqual([]);
    },
    patient(60_000),
  );
});

describe('error messages name their docs', () => {
  it('every docs/ page and #anchor named in src/ exists, and the common errors name their entry', () => {
    const named: string[] = [];
    const broken: string[] = [];
    for (const file of sourceFiles(path.join(repoRoot, 'src'))) {
      const text = readFileSync(file, 'utf8');
      for (const m of text.matchAll(/\bdocs\/([a-z0-9-]+\.md)(?:#([a-z0-9-]+))?/g)) {
        const page = path.join(repoRoot, 'docs', m[1]!);
        const where = `${path.relative(repoRoot, file)}: docs/${m[1]}${m[2] ? `#${m[2]}` : ''}`;
        if (!existsSync(page)) broken.push(`${where} (no such page)`);
        else if (m[2] && !anchorExists(page, m[2])) broken.push(`${where} (no such heading)`);
        if (m[1] === 'troubleshooting.md' && m[2]) named.push(m[2]);
      }
    }
    expect(broken).toEqual([]);
    expect(
      COMMON.filter((a) => !named.includes(a)),
      'entries no error message names any more',
    ).toEqual([]);
  });

  describe('as the built CLI prints them', () => {
    const KEY = 'sk_test_docshelp01234567';
    let emu: RunningEmulator;
    let dir: string;
    beforeAll(async () => {
      emu = await startEmulator({ port: 0, apiKeys: [KEY] });
      dir = workspace({
        'kms-sync.yaml':
          'apiVersion: kms-sync/v1\nprojects:\n  - slug: shop\n    name: Shop\n    environments:\n      - type: staging\n        url: https://s.example\n',
      });
    });
    afterAll(async () => {
      await emu?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it(
      'connection refused, and a refused credential',
      async () => {
        // A port that was free a moment ago: nothing listens there.
        const port = await new Promise<number>((resolve) => {
          const s = createServer().listen(0, '127.0.0.1', () => {
            const p = (s.address() as { port: number }).port;
            s.close(() => resolve(p));
          });
        });
        const refused = await runCli(['plan'], {
          cwd: dir,
          env: { KMS_API_URL: `http://127.0.0.1:${port}/api/v1`, KMS_API_KEY: KEY },
        });
        expect(refused.code).toBe(1);
        expect(refused.stderr).toContain('connection refused');
        expect(refused.stderr).toContain('docs/troubleshooting.md#connection-refused');

        const auth = await runCli(['plan'], {
          cwd: dir,
          env: { KMS_API_URL: emu.url, KMS_API_KEY: 'sk_test_notthisservice99' },
        });
        expect(auth.code).toBe(1);
        expect(auth.stderr).toContain('401');
        expect(auth.stderr).toContain('docs/troubleshooting.md#authentication-failed');
      },
      patient(60_000),
    );
  });
});
