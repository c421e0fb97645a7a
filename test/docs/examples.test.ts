// The examples of README.md and docs/ are the ones the tests run (issue 30). Every fenced yaml, hcl,
// ts and sh block carries a marker on the line above its fence (README "Contributing"):
// `<!-- example: run -->` or `<!-- example: illustration -->`. Run blocks are checked for real:
// YAML against the configuration's JSON Schema (ajv, not kms-sync's own loader), TypeScript with one
// tsc run against the built CDKTF bindings, HCL with `terraform validate` and the built provider,
// shell with bash in an empty folder against one emulator. Relative links must lead somewhere.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { cdktfProject } from '../cdktf/helpers.js';
import { offlineTerraform, NO_TERRAFORM, terraformOrSkip } from '../provider/terraform-support.js';
import { skipWhen } from '../support/skip.js';
import { cliPath, RAW_KEY_PATTERN, repoRoot } from '../support/cli.js';
import { anchors, CHECKED_LANGUAGES, docFiles, fencedBlocks, readDoc, relativeLinks, type Block } from './markdown.js';
import { patient } from '../support/patience.js';

const files = docFiles(repoRoot);
const blocks: Block[] = files.flatMap((f) => fencedBlocks(f, readDoc(repoRoot, f)));
const runnable = (family: string) => blocks.filter((b) => CHECKED_LANGUAGES[b.lang] === family && b.marker === 'run');
const where = (b: Block) => `${b.file}:${b.line}`;

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}
function run(
  cmd: string,
  args: string[],
  opts: { cwd: string; env: NodeJS.ProcessEnv; timeout?: number },
): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      cmd,
      args,
      { ...opts, maxBuffer: 16 * 1024 * 1024, timeout: opts.timeout ?? 120_000 },
      (e, stdout, stderr) => {
        resolve({ code: e ? Number((e as { code?: unknown }).code ?? 1) || 1 : 0, stdout, stderr });
      },
    );
  });
}

describe('documentation examples', () => {
  it('finds the documentation and its examples', () => {
    expect(files).toContain('README.md');
    expect(files).toContain('docs/getting-started.md');
    for (const family of ['yaml', 'ts', 'hcl', 'sh'])
      expect(runnable(family).length, `runnable ${family} blocks`).toBeGreaterThan(0);
  });

  it('every yaml, hcl, ts and sh block is marked run or illustration', () => {
    const unmarked = blocks.filter((b) => CHECKED_LANGUAGES[b.lang] && !b.marker).map((b) => `${where(b)} (${b.lang})`);
    const bad = blocks.filter((b) => b.badMarker).map((b) => `${where(b)}: ${b.badMarker}`);
    expect(bad, 'marker lines must read <!-- example: run --> or <!-- example: illustration -->').toEqual([]);
    expect(unmarked, 'put <!-- example: run --> or <!-- example: illustration --> on the line above the fence').toEqual(
      [],
    );
  });

  it('relative links lead to a file, and #anchors to a heading of it', () => {
    const broken: string[] = [];
    const anchorCache = new Map<string, Set<string>>();
    for (const f of [...files, 'CHANGELOG.md']) {
      if (!existsSync(path.join(repoRoot, f))) continue;
      for (const link of relativeLinks(f, readDoc(repoRoot, f))) {
        const [target, anchor] = link.target.split('#', 2) as [string, string | undefined];
        const rel = target
          ? path.posix.normalize(path.posix.join(path.posix.dirname(f), decodeURIComponent(target)))
          : f;
        if (!existsSync(path.join(repoRoot, rel))) {
          broken.push(`${f}:${link.line}: ${link.target} (no file ${rel})`);
          continue;
        }
        if (anchor === undefined || !rel.endsWith('.md')) continue;
        if (!anchorCache.has(rel)) anchorCache.set(rel, anchors(readDoc(repoRoot, rel)));
        if (!anchorCache.get(rel)!.has(anchor))
          broken.push(`${f}:${link.line}: ${link.target} (no heading #${anchor} in ${rel})`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('runnable YAML blocks are configurations the JSON Schema accepts', async () => {
    // ajv as a JSON Schema validator of its own, independent of src/config (which compiles the same schema).
    const require = createRequire(import.meta.url);
    const Ajv = require('ajv').default as new (
      o: object,
    ) => { compile(s: object): ((d: unknown) => boolean) & { errors?: unknown[] } };
    const addFormats = require('ajv-formats').default as (a: unknown) => void;
    const ajv = new Ajv({ allErrors: true, strict: false });
    addFormats(ajv);
    const schema = JSON.parse(readDoc(repoRoot, 'schemas/kms-sync.schema.json'));
    const validate = ajv.compile(schema);
    const problems: string[] = [];
    for (const b of runnable('yaml')) {
      let doc: unknown;
      try {
        doc = parseYaml(b.text);
      } catch (e) {
        problems.push(`${where(b)}: not YAML: ${(e as Error).message}`);
        continue;
      }
      // A fragment that shows only part of a file (stores:, settings:) is checked as a file of its own.
      if (doc && typeof doc === 'object' && !('apiVersion' in doc)) doc = { apiVersion: 'kms-sync/v1', ...doc };
      if (!validate(doc)) problems.push(`${where(b)}: ${JSON.stringify(validate.errors)}`);
    }
    expect(problems).toEqual([]);
  });

  it(
    'runnable TypeScript blocks type-check against the CDKTF bindings (one tsc run)',
    async () => {
      const ts = runnable('ts');
      const sources: Record<string, string> = {};
      // Each block is a module of its own, so that two blocks' top-level names never collide.
      ts.forEach((b, i) => {
        sources[`block${i}.ts`] = `${b.text}\nexport {};\n`;
      });
      const dir = cdktfProject({
        ...sources,
        'tsconfig.json': JSON.stringify({
          compilerOptions: {
            target: 'es2023',
            module: 'nodenext',
            moduleResolution: 'nodenext',
            strict: true,
            noEmit: true,
            skipLibCheck: true,
            types: ['node'],
          },
          include: ['*.ts'],
        }),
      });
      try {
        const tsc = path.join(repoRoot, 'node_modules', 'typescript', 'bin', 'tsc');
        const r = await run(process.execPath, [tsc, '-p', dir], { cwd: dir, env: process.env });
        // tsc reports block3.ts(5,7): name the documentation's file and line instead.
        const out = r.stdout.replace(
          /block(\d+)\.ts\((\d+),(\d+)\)/g,
          (_s, i: string, l: string, c: string) =>
            `${where(ts[Number(i)]!).replace(/:\d+$/, '')}:${ts[Number(i)]!.line + Number(l)}:${c}`,
        );
        expect(out.trim()).toBe('');
        expect(r.code).toBe(0);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    patient(120_000),
  );

  const terraform = terraformOrSkip();
  it.skipIf(skipWhen(!terraform, `test/docs/examples.test.ts (runnable HCL blocks): ${NO_TERRAFORM}`))(
    'runnable HCL blocks pass terraform validate with the built provider',
    async () => {
      const root = mkdtempSync(path.join(tmpdir(), 'kms-sync-docs-hcl-'));
      try {
        const tf = offlineTerraform(terraform!, root, {
          url: 'http://127.0.0.1:9/api/v1',
          apiKey: 'sk_test_docs0000000000',
        });
        const problems: string[] = [];
        for (const [i, b] of runnable('hcl').entries()) {
          // terraform validate checks a provider block only when a resource or data source uses it.
          if (/^\s*provider\s+"/m.test(b.text) && !/^\s*(resource|data)\s+"/m.test(b.text)) {
            problems.push(
              `${where(b)}: a provider block without a resource is not checked by terraform validate: add one`,
            );
            continue;
          }
          const dir = path.join(root, `block${i}`);
          mkdirSync(dir);
          writeFileSync(path.join(dir, 'main.tf'), b.text);
          const init = await tf.run(dir, ['init', '-backend=false', '-input=false', '-no-color']);
          if (init.code !== 0) {
            problems.push(`${where(b)}: terraform init: ${init.stderr || init.stdout}`);
            continue;
          }
          const v = await tf.run(dir, ['validate', '-no-color']);
          if (v.code !== 0) problems.push(`${where(b)}: terraform validate: ${v.stderr || v.stdout}`);
        }
        expect(problems).toEqual([]);
      } finally {
        rmSync(root, { recursive: true, force: true });
      }
    },
    patient(180_000),
  );

  describe('runnable shell blocks, against one emulator', () => {
    const KEY = 'sk_test_docsexamples0123';
    let emu: RunningEmulator;
    let root: string;
    beforeAll(async () => {
      emu = await startEmulator({ port: 0, apiKeys: [KEY] });
      root = mkdtempSync(path.join(tmpdir(), 'kms-sync-docs-sh-'));
      mkdirSync(path.join(root, 'bin'));
      // What `npm link` gives a user: a kms-sync command on PATH (the build's file is not executable).
      writeFileSync(path.join(root, 'bin', 'kms-sync'), `#!/bin/sh\nexec "${process.execPath}" "${cliPath}" "$@"\n`, {
        mode: 0o755,
      });
    });
    afterAll(async () => {
      await emu?.close();
      if (root) rmSync(root, { recursive: true, force: true });
    });

    it(
      'each runs with bash -e in an empty folder and exits 0, printing no raw key',
      async () => {
        const failures: string[] = [];
        for (const [i, b] of runnable('sh').entries()) {
          const cwd = path.join(root, `block${i}`);
          const home = path.join(root, `home${i}`);
          mkdirSync(cwd);
          mkdirSync(home);
          // A user's machine, not CI: CI=true would (rightly) refuse keys into a local store file.
          const env: NodeJS.ProcessEnv = {
            PATH: `${path.join(root, 'bin')}:${path.dirname(process.execPath)}:${process.env.PATH}`,
            HOME: home,
            TMPDIR: tmpdir(),
            NO_COLOR: '1',
            NODE_DISABLE_COMPILE_CACHE: '1',
            KMS_API_URL: emu.url,
            KMS_API_KEY: KEY,
          };
          const r = await run('bash', ['-e', '-o', 'pipefail', '-c', b.text], { cwd, env });
          if (r.code !== 0) failures.push(`${where(b)}: exit ${r.code}\n${(r.stdout + r.stderr).slice(-3000)}`);
          if (RAW_KEY_PATTERN.test(r.stdout + r.stderr)) failures.push(`${where(b)}: printed a raw key`);
        }
        expect(failures).toEqual([]);
      },
      patient(240_000),
    );
  });
});
