// A YAML indentation mistake is reported at the mis-indented line (kms-sync validate as a process),
// not at the previous key's field where the yaml package's parse broke down; the fast path never
// accepts such a file (it falls back to the yaml package); and valid YAML is never flagged.
import { execFileSync } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { parseAllDocuments } from 'yaml';
import { afterAll, describe, expect, it } from 'vitest';
import { fastParseYaml } from '../../src/config/fast-yaml.js';
import { findMisindentedLine } from '../../src/config/indentation.js';
import { repoRoot, runCli, workspace } from '../support/cli.js';

const head = 'apiVersion: kms-sync/v1\nprojects:\n  - slug: shop\n';
const CASES: { name: string; text: string; at: string; field: string; says: string }[] = [
  {
    name: 'key one space short',
    text: `${head}   name: Shop\n    environments: []\n`,
    at: '4:4',
    field: 'name',
    says: 'indent it 4 spaces',
  },
  {
    name: 'key one space deep',
    text: `${head}    name: Shop\n     environments:\n      - type: staging\n`,
    at: '5:6',
    field: 'environments',
    says: 'indent it 4 spaces',
  },
  {
    name: "key at the list items' column",
    text: `${head}    name: Shop\n  environments:\n      - type: staging\n        url: https://x\n`,
    at: '5:3',
    field: 'environments',
    says: 'at the column of the list items',
  },
  {
    name: 'key of a nested list item',
    at: '11:10',
    field: 'keys',
    says: 'indent it 10 spaces',
    text: `${head}    name: Shop\n    environments:\n      - type: staging\n        url: https://x\n        clients:\n        - name: a\n          template: std\n         keys: []\n`,
  },
];

const dir = workspace({
  ...Object.fromEntries(CASES.map((c, i) => [`bad${i}.yaml`, c.text])),
  'quote.yaml': `${head}    name: "Shop\n`,
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('YAML indentation mistakes', () => {
  for (const [i, c] of CASES.entries()) {
    it(`${c.name}: reported at the line that breaks it`, async () => {
      expect(fastParseYaml(c.text, false), 'the fast path must fall back').toBeUndefined();
      const r = await runCli(['validate', '-f', `bad${i}.yaml`], { cwd: dir });
      expect(r.code).toBe(1);
      const lines = r.stderr.trim().split('\n').slice(1);
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatch(new RegExp(`^bad${i}\\.yaml:${c.at}: ${c.field}: YAML indentation: `));
      expect(lines[0]).toContain(c.says);
      expect(r.stderr).not.toMatch(/projects\[\d\]\.(name|slug)/);
    });
  }

  it('never flags a valid YAML file of the repository', () => {
    const files = execFileSync('git', ['ls-files', '*.yaml', '*.yml'], { cwd: repoRoot, encoding: 'utf8' })
      .trim()
      .split('\n');
    expect(files.length).toBeGreaterThan(3);
    for (const f of files) {
      const text = readFileSync(path.join(repoRoot, f), 'utf8');
      if (parseAllDocuments(text).some((d) => d.errors.length > 0)) continue;
      expect(findMisindentedLine(text), f).toBeUndefined();
    }
  });

  it("other syntax errors keep the yaml package's message", async () => {
    const r = await runCli(['validate', '-f', 'quote.yaml'], { cwd: dir });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('YAML: ');
    expect(r.stderr).not.toContain('YAML indentation');
  });
});
