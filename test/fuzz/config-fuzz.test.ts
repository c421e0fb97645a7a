// Config fuzz (issue 14): seeded mutations of real configurations, YAML and JSON, through the
// loader in-process (thousands) and through `kms-sync validate` as a real process (a sample).
// Asserted: the loader either loads or throws ConfigError; every problem has line:column and a
// field path; no warning or engine message escapes; the CLI exits 0/1/2/3 with no stack trace;
// and wherever the fast YAML path accepts a text, it gives exactly the yaml package's values.
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { ConfigError, formatDiagnostic, loadDesiredStateFromSources } from '../../src/config/index.js';
import { fastParseYaml } from '../../src/config/fast-yaml.js';
import { repoRoot, runCli, workspace } from '../support/cli.js';
import { patient } from '../support/patience.js';

const SEED = Number(process.env.KMS_SYNC_FUZZ_SEED ?? 20261123);
const CASES = Number(process.env.KMS_SYNC_FUZZ_CASES ?? 2500);
const CLI_CASES = 16;

function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const examples = ['project.yaml', 'teams/partners.yaml', 'teams/payments.yaml'].map((f) =>
  readFileSync(path.join(repoRoot, 'examples', 'acme', f), 'utf8'),
);
const jsonBase = JSON.stringify(
  {
    apiVersion: 'kms-sync/v1',
    stores: [{ name: 'vault1', uri: 'vault://v:8200/secret/kms' }],
    projects: [
      {
        slug: 'acme',
        name: 'Acme',
        environments: [
          {
            type: 'production',
            url: 'https://api.acme.example',
            templates: [{ name: 'gold', rateLimitDay: 100, maxClients: 5 }],
            clients: [
              {
                name: 'globex',
                template: 'gold',
                ipWhitelist: ['10.0.0.0/8'],
                metadata: { team: 'x' },
                keys: [{ name: 'primary', ttl: '90d', secret: { store: 'vault1' } }],
              },
            ],
            endpoints: [{ method: 'GET', path: '/v1/users/{id}', name: 'Get user' }],
          },
        ],
      },
    ],
  },
  null,
  2,
);

const TOKENS = [
  ':',
  ': ',
  '-',
  '- ',
  ' ',
  '  ',
  '\n',
  '\n  ',
  '[',
  ']',
  '{',
  '}',
  ',',
  '"',
  "'",
  '#',
  ' #',
  '&a ',
  '*a',
  '!!str ',
  '|',
  '>',
  '?',
  '%',
  '\t',
  '\r',
  '\r\n',
  '\u0000',
  '\u001b[2J',
  '\u202e',
  '\ufeff',
  'é',
  '😀',
  '${env:HOME}',
  '${env:UNSET}',
  '${env:A:-${env:B}}',
  '${x}',
  '$${env:X}',
  'null',
  '~',
  'true',
  '0x1F',
  '0o17',
  '1e3',
  '.inf',
  '-',
  '---\n',
  '...\n',
  'apiVersion: kms-sync/v1\n',
  'name: dup\n',
  '<<: *a\n',
  '__proto__: 1\n',
  '10.0.0.0/33',
  '90x',
  '2027-13-01T00:00:00Z',
  '"\\u00e9\\x41\\q"',
  "'it''s'",
];

function mutate(text: string, r: () => number): string {
  const pick = <T>(xs: readonly T[]) => xs[Math.floor(r() * xs.length)]!;
  let t = text;
  const n = 1 + Math.floor(r() * 3);
  for (let i = 0; i < n; i++) {
    const at = Math.floor(r() * (t.length + 1));
    const lines = t.split('\n');
    const li = Math.floor(r() * lines.length);
    switch (Math.floor(r() * 9)) {
      case 0:
        t = t.slice(0, at) + pick(TOKENS) + t.slice(at);
        break;
      case 1:
        t = t.slice(0, at) + t.slice(at + 1 + Math.floor(r() * 8));
        break;
      case 2:
        lines.splice(li, 0, lines[li] ?? '');
        t = lines.join('\n');
        break; // duplicate a line
      case 3:
        lines[li] = `  ${lines[li] ?? ''}`;
        t = lines.join('\n');
        break; // indent
      case 4:
        lines[li] = (lines[li] ?? '').replace(/^ {1,2}/, '');
        t = lines.join('\n');
        break; // dedent
      case 5:
        lines[li] = (lines[li] ?? '').replace(/: .*$/, `: ${pick(TOKENS)}`);
        t = lines.join('\n');
        break; // replace a value
      case 6:
        t = t.slice(0, at);
        break; // truncate
      case 7: {
        const lj = Math.floor(r() * lines.length);
        [lines[li], lines[lj]] = [lines[lj] ?? '', lines[li] ?? ''];
        t = lines.join('\n');
        break;
      }
      default:
        t = t.slice(0, at) + pick(TOKENS).repeat(1 + Math.floor(r() * 200)) + t.slice(at);
        break; // floods and deep nesting
    }
  }
  return t;
}

interface Case {
  file: string;
  text: string;
}

function cases(count: number, seed: number): Case[] {
  const r = rng(seed);
  const out: Case[] = [];
  for (let i = 0; i < count; i++) {
    if (r() < 0.2) out.push({ file: `c${i}.json`, text: mutate(jsonBase, r) });
    else out.push({ file: `c${i}.yaml`, text: mutate(examples[Math.floor(r() * examples.length)]!, r) });
  }
  return out;
}

const ENGINE =
  /TypeError|RangeError|ReferenceError|SyntaxError: (?!.*JSON)|Maximum call stack|Cannot read properties|is not a function|is not iterable|^\s+at .+:\d+:\d+\)?$/m;
const DIAGNOSTIC = /^c\d+\.(yaml|json):\d+:\d+: \S.*?: \S/;

describe(`config fuzz (seed ${SEED})`, () => {
  const warnings: unknown[] = [];
  let spy: ReturnType<typeof vi.spyOn>;
  beforeAll(() => {
    spy = vi.spyOn(process, 'emitWarning').mockImplementation((w: unknown) => {
      warnings.push(w);
    });
  });
  afterAll(() => spy.mockRestore());

  it(
    `${CASES} mutated configurations through the loader: loads or exact diagnostics, fast path = yaml package`,
    () => {
      let loaded = 0;
      let rejected = 0;
      let fastAccepted = 0;
      const env = { HOME: '/home/x', A: '' };
      for (const c of cases(CASES, SEED)) {
        try {
          loadDesiredStateFromSources([c], { env });
          loaded++;
        } catch (err) {
          if (!(err instanceof ConfigError))
            throw new Error(`${c.file}: ${String(err)}\n--- input ---\n${c.text.slice(0, 2000)}`);
          rejected++;
          for (const d of err.diagnostics) {
            const line = formatDiagnostic(d);
            expect(d.line, line).toBeGreaterThan(0);
            expect(d.column, line).toBeGreaterThan(0);
            expect(line, c.text.slice(0, 500)).toMatch(DIAGNOSTIC);
            expect(line).not.toMatch(ENGINE);
            expect(line).not.toMatch(/[\u0000-\u0008\u000b-\u001f\u007f\u202e]/);
          }
        }
        if (c.file.endsWith('.yaml')) {
          const fast = fastParseYaml(c.text);
          if (fast) {
            fastAccepted++;
            const docs = parseAllDocuments(c.text, { uniqueKeys: true, logLevel: 'silent' });
            expect(
              Array.isArray(docs) && docs.length <= 1 && docs.every((d) => d.errors.length === 0),
              `fast path accepted what yaml rejects:\n${c.text}`,
            ).toBe(true);
            const value = docs.length ? (docs[0]!.toJS() as unknown) : null;
            expect(isDeepStrictEqual(fast.value, value), `fast path differs from yaml:\n${c.text}`).toBe(true);
          }
        }
      }
      expect(warnings).toEqual([]);
      // The mutations exercise both outcomes and both YAML paths.
      expect(loaded).toBeGreaterThan(CASES * 0.05);
      expect(rejected).toBeGreaterThan(CASES * 0.3);
      expect(fastAccepted).toBeGreaterThan(CASES * 0.1);
    },
    patient(60_000),
  );

  it(
    `${CLI_CASES} of them through kms-sync validate: exit 0/1/2/3, no stack trace, located diagnostics`,
    async () => {
      const dir = workspace();
      const sample = cases(CLI_CASES, SEED + 1);
      for (const c of sample) await writeFile(path.join(dir, c.file), c.text);
      const results = [];
      for (let i = 0; i < sample.length; i += 4) {
        results.push(
          ...(await Promise.all(
            sample
              .slice(i, i + 4)
              .map((c) => runCli(['validate', '-f', c.file], { cwd: dir, env: { HOME: dir } }).then((r) => ({ c, r }))),
          )),
        );
      }
      for (const { c, r } of results) {
        expect([0, 1, 2, 3], `${c.file}: ${r.stderr}`).toContain(r.code);
        expect(`${r.stdout}\n${r.stderr}`, c.file).not.toMatch(ENGINE);
        expect(r.stderr).not.toMatch(/Warning:/);
        if (r.code === 1) {
          const lines = r.stderr.trim().split('\n');
          const body = lines.filter(
            (l) =>
              !/^Error: configuration is not valid:$|^…and \d+ more|^warning: |^secret names collide:|^ {2}- /.test(l),
          );
          for (const l of body) expect(l, `${c.file}:\n${r.stderr}`).toMatch(DIAGNOSTIC);
        }
      }
    },
    patient(60_000),
  );

  // Issue 42: values, keys and documents of 8 to 16 MB (a cut of a long value once overflowed the
  // stack from 8 MB on). Each gets its ordinary diagnostics (or loads), never a stack trace, under
  // a raised --max-file-size; the default limit refuses them by size before parsing.
  it(
    'very large scalars, keys and documents through kms-sync validate: diagnostics, no stack trace',
    async () => {
      const MB = 1024 * 1024;
      const head =
        'apiVersion: kms-sync/v1\nprojects:\n  - slug: acme\n    name: Acme\n    environments:\n      - type: production\n        url: https://api.acme.example\n';
      const big: Case[] = [
        {
          file: 'scalar.yaml',
          text: `${head}        clients:\n          - name: c\n            template: "${'s'.repeat(16 * MB)}"\n`,
        },
        {
          file: 'escapes.yaml',
          text: `${head}        clients:\n          - name: "${'\\"'.repeat(4 * MB)}"\n            template: t\n`,
        },
        { file: 'key.yaml', text: `${head}        ${'k'.repeat(16 * MB)}: 1\n` },
        { file: 'key.json', text: `{"apiVersion": "kms-sync/v1", "${'j'.repeat(16 * MB)}": 1}` },
        {
          file: 'document.yaml',
          text: `${head}        clients:\n          - name: c\n            template: t\n            metadata:\n${Array.from({ length: Math.floor((6 * MB) / 32) }, (_, i) => `              k${i}: value-${i}-${'m'.repeat(6)}\n`).join('')}`,
        },
        { file: 'plain.yaml', text: `${'p'.repeat(12 * MB)}\n` },
      ];
      const dir = workspace();
      for (const c of big) await writeFile(path.join(dir, c.file), c.text);
      for (let i = 0; i < big.length; i += 2) {
        await Promise.all(
          big.slice(i, i + 2).map(async (c) => {
            const r = await runCli(['validate', '-f', c.file, '--max-file-size', '40MB'], {
              cwd: dir,
              env: { HOME: dir },
            });
            expect([0, 1], `${c.file}: ${r.stderr.slice(0, 500)}`).toContain(r.code);
            expect(`${r.stdout}\n${r.stderr}`, c.file).not.toMatch(ENGINE);
            expect(r.stderr.length, c.file).toBeLessThan(20_000);
            if (r.code === 1)
              for (const l of r.stderr
                .trim()
                .split('\n')
                .slice(1)
                .filter((x) => !/^…and \d+ more/.test(x)))
                expect(l.slice(0, 300), c.file).toMatch(DIAGNOSTIC_OF(c.file));
          }),
        );
      }
      const limited = await runCli(['validate', '-f', 'scalar.yaml'], { cwd: dir });
      expect(limited.code).toBe(1);
      expect(limited.stderr).toContain('scalar.yaml: the file is larger than the limit of 5 MB per configuration file');
    },
    patient(180_000),
  );
});

const DIAGNOSTIC_OF = (file: string) => new RegExp(`^${file.replace('.', '\\.')}:\\d+:\\d+: \\S`);
