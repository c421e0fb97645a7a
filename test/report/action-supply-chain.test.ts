// Issues 26 item 8, 35 item 7, 39 item 1: the GitHub Action's supply chain. setup-node is pinned by
// commit SHA; the CLI is the action's own source at the pinned ref, built in the action's folder with
// `npm ci --ignore-scripts` from its lock file (no registry package named kms-sync is installed);
// the build runs with no credential in its environment, no npm_config_* variable and no .npmrc but
// the action's own (none): not the user's, not the checkout's, not one in a folder above the
// action's, even one that declares it a workspace; the credentials reach the kms-sync process in
// the next step; pull_request_target is refused unless the caller opts in. Mounted by running the
// action's own scripts with an `npm` on PATH that records where, how and with what environment it
// ran, and asks the real npm which registries those settings resolve to.
import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { repoRoot } from '../support/cli.js';
import { scratchDir } from '../support/scratch.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const action = parse(readFileSync(path.join(repoRoot, 'action.yml'), 'utf8')) as any;
const steps = action.runs.steps as {
  name: string;
  id?: string;
  run?: string;
  uses?: string;
  env?: Record<string, string>;
}[];
const buildStep = steps.find((s) => s.name.startsWith('Build kms-sync'))!;
const runStep = steps.find((s) => s.id === 'run')!;
const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0)) await c();
});

const KEY = 'sk_test_actionsupplychain0123456';
const TOKEN = 'ghs_actionsupplychaintoken0123456789';
const AGE = 'AGE-SECRET-KEY-1ACTIONSUPPLYCHAIN';

/** A runner laid out for the action: the action's folder under a hostile parent, a hostile checkout, a stand-in npm. */
function runner() {
  const root = scratchDir('kms-sync-action-');
  cleanup.push(() => rmSync(root, { recursive: true, force: true }));
  const parent = path.join(root, '_actions');
  const actionPath = path.join(parent, 'kms-sync', 'v1');
  const checkout = path.join(root, 'checkout');
  const bin = path.join(root, 'bin');
  const log = path.join(root, 'log');
  const evilrc = path.join(root, 'evil.npmrc');
  for (const d of [actionPath, checkout, bin, log]) mkdirSync(d, { recursive: true });
  const evil = 'registry=http://127.0.0.1:9/\n@acme:registry=http://127.0.0.1:9/\n//127.0.0.1:9/:_authToken=stolen\n';
  // A .npmrc (and a workspace root that claims the action's folder) above the action, one in the checkout, one the caller's environment points at.
  writeFileSync(path.join(parent, '.npmrc'), evil);
  writeFileSync(path.join(parent, 'package.json'), '{"name":"evil-root","private":true,"workspaces":["kms-sync/*"]}\n');
  writeFileSync(path.join(checkout, '.npmrc'), evil);
  writeFileSync(evilrc, evil);
  writeFileSync(path.join(actionPath, 'package.json'), readFileSync(path.join(repoRoot, 'package.json')));
  writeFileSync(path.join(checkout, 'kms-sync.yaml'), 'apiVersion: kms-sync/v1\nprojects: []\n');
  const realNpm = execFileSync('sh', ['-c', 'command -v npm'], { encoding: 'utf8' }).trim();
  // The stand-in npm: records its folder, arguments and environment; for `ci`, asks the real npm
  // which registries those arguments resolve to in that folder; `run build` makes a kms-sync that
  // prints its arguments and which credentials it sees.
  writeFileSync(
    path.join(bin, 'npm'),
    `#!/usr/bin/env bash
log=${JSON.stringify(log)}
printf '%s\\n' "$PWD" >> "$log/cwd"
printf '%s\\n' "$*" >> "$log/args"
env >> "$log/env"
if [ "$1" = ci ]; then
  shift
  "${realNpm}" config get registry "$@" > "$log/registry" 2>&1
  "${realNpm}" config get @acme:registry "$@" > "$log/scoped" 2>&1
fi
if [ "$1" = run ]; then
  mkdir -p dist/bin
  printf '%s\\n' 'const e = process.env; console.log("kms-sync " + process.argv.slice(2).join(" ")); console.log("sees KMS_API_KEY=" + (e.KMS_API_KEY ? "yes" : "no") + " GITHUB_TOKEN=" + (e.GITHUB_TOKEN ? "yes" : "no") + " INPUT_API_KEY=" + (e.INPUT_API_KEY ? "yes" : "no"));' > dist/bin/kms-sync.js
fi
`,
  );
  chmodSync(path.join(bin, 'npm'), 0o755);
  const env = (event: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv => ({
    PATH: `${bin}:${path.dirname(process.execPath)}:${path.dirname(realNpm)}:/usr/bin:/bin`,
    HOME: root,
    TMPDIR: tmpdir(),
    NODE_DISABLE_COMPILE_CACHE: '1',
    RUNNER_TEMP: root,
    GITHUB_ACTION_PATH: actionPath,
    GITHUB_OUTPUT: path.join(log, 'output'),
    GITHUB_EVENT_NAME: event,
    // What a workflow may have set on the `uses:` step: reaches every step of a composite action.
    KMS_API_KEY: KEY,
    SOPS_AGE_KEY: AGE,
    GITHUB_TOKEN: TOKEN,
    npm_config_registry: 'http://127.0.0.1:9/',
    NPM_CONFIG_USERCONFIG: evilrc,
    ...extra,
  });
  return { root, actionPath, checkout, log, env };
}

function run(script: string, cwd: string, env: NodeJS.ProcessEnv): Promise<{ code: number; out: string }> {
  return new Promise((resolve) => {
    execFile('bash', ['-c', script], { cwd, env }, (e, stdout, stderr) =>
      resolve({ code: e ? Number((e as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
    );
  });
}

describe('the GitHub Action', () => {
  it('pins every action it uses by commit SHA and names no registry package of kms-sync', () => {
    const uses = steps.filter((s) => s.uses).map((s) => s.uses!);
    expect(uses.length).toBeGreaterThan(0);
    for (const u of uses) expect(u).toMatch(/^[\w.-]+\/[\w.-]+@[0-9a-f]{40}$/);
    expect(action.inputs.version).toBeUndefined();
    const scripts = steps.map((s) => s.run ?? '').join('\n');
    expect(scripts).not.toMatch(/kms-sync@|npx |npm (install|i) /);
    expect(scripts).toContain('npm ci --ignore-scripts');
  });

  it('builds in its own folder with no credential and no .npmrc but its own, then gives the credentials to kms-sync alone', async () => {
    const r0 = runner();
    const built = await run(buildStep.run!, r0.checkout, {
      ...r0.env('push'),
      INPUT_ALLOW_PULL_REQUEST_TARGET: 'false',
    });
    expect(built.code, built.out).toBe(0);
    const cwds = readFileSync(path.join(r0.log, 'cwd'), 'utf8').trim().split('\n');
    expect(new Set(cwds)).toEqual(new Set([r0.actionPath]));
    const args = readFileSync(path.join(r0.log, 'args'), 'utf8').trim().split('\n');
    expect(args[0]).toMatch(/^ci --ignore-scripts /);
    expect(args[1]).toMatch(/^run build /);
    const env = readFileSync(path.join(r0.log, 'env'), 'utf8');
    for (const secret of [KEY, TOKEN, AGE]) expect(env).not.toContain(secret);
    expect(env).not.toMatch(/^npm_config_/im);
    // npm's temporary files and Node's compile cache for npm: the job's own folder, not the shared /tmp.
    expect(env.split('\n')).toContain(`TMPDIR=${r0.root}`);
    expect(readFileSync(path.join(r0.log, 'registry'), 'utf8').trim()).toBe('https://registry.npmjs.org/');
    expect(readFileSync(path.join(r0.log, 'scoped'), 'utf8').trim()).toBe('undefined');

    // The command step: the CLI from the action's folder, run in the checkout, with the credentials.
    const inputs = {
      INPUT_COMMAND: 'plan',
      INPUT_CONFIG: 'kms-sync.yaml',
      INPUT_ENVIRONMENTS: '',
      INPUT_COMMENT: 'github',
      INPUT_API_URL: 'https://kms.example/api/v1',
      INPUT_API_KEY: KEY,
      INPUT_FAIL_ON_DRIFT: 'false',
      INPUT_ALLOW_LOCAL_STORE: 'false',
      INPUT_ARGS: '',
      INPUT_GITHUB_TOKEN: TOKEN,
    };
    const { KMS_API_KEY: _k, GITHUB_TOKEN: _t, ...caller } = r0.env('push');
    const r = await run(runStep.run!, r0.checkout, { ...caller, ...inputs });
    expect(r.code, r.out).toBe(0);
    expect(r.out).toContain('kms-sync plan -f kms-sync.yaml --detailed-exitcode --format markdown');
    expect(r.out).toContain('sees KMS_API_KEY=yes GITHUB_TOKEN=yes INPUT_API_KEY=no');
    // A second use of the action in the job does not build again.
    const again = await run(buildStep.run!, r0.checkout, {
      ...r0.env('push'),
      INPUT_ALLOW_PULL_REQUEST_TARGET: 'false',
    });
    expect(again.code).toBe(0);
    expect(readFileSync(path.join(r0.log, 'args'), 'utf8').trim().split('\n')).toHaveLength(2);
  });

  it('refuses pull_request_target unless allow-pull-request-target is true', async () => {
    expect(action.inputs['allow-pull-request-target'].default).toBe('false');
    const r0 = runner();
    const refused = await run(buildStep.run!, r0.checkout, {
      ...r0.env('pull_request_target'),
      INPUT_ALLOW_PULL_REQUEST_TARGET: 'false',
    });
    expect(refused.code).toBe(1);
    expect(refused.out).toContain('::error::kms-sync refuses pull_request_target runs');
    const allowed = await run(buildStep.run!, r0.checkout, {
      ...r0.env('pull_request_target'),
      INPUT_ALLOW_PULL_REQUEST_TARGET: 'true',
    });
    expect(allowed.code, allowed.out).toBe(0);
  });

  it('no doc, example or action tells anyone to install kms-sync from the npm registry by name (it is not published there)', () => {
    const files = [
      'README.md',
      'action.yml',
      ...['docs', 'examples'].flatMap((d) =>
        readdirSync(path.join(repoRoot, d), { recursive: true, encoding: 'utf8' }).map((f) => path.join(d, f)),
      ),
    ].filter((f) => /\.(md|ya?ml|ts|tf|json)$/.test(f) || f.endsWith('.gitlab-ci.yml'));
    const found: string[] = [];
    for (const f of files) {
      const text = readFileSync(path.join(repoRoot, f), 'utf8');
      for (const m of text.matchAll(
        /npx kms-sync|kms-sync@(\d|\$\{?(KMS_SYNC_VERSION|INPUT_VERSION)|latest)|npm (install|i|add)( --?[\w-]+)* kms-sync\b/g,
      ))
        found.push(`${f}: ${m[0]}`);
    }
    expect(found).toEqual([]);
  });

  it('the package publishes npm-shrinkwrap.json (a copy of the lock file, made while npm packs)', () => {
    const pkg = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as {
      files: string[];
      scripts: Record<string, string>;
    };
    expect(pkg.files).toContain('npm-shrinkwrap.json');
    expect(pkg.scripts.prepack).toBe('node scripts/shrinkwrap.js');
    expect(pkg.scripts.postpack).toBe('node scripts/shrinkwrap.js remove');
  });

  it('ships the license package.json names: LICENSE holds the Apache License 2.0 in full', () => {
    const pkg = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as {
      license: string;
      files: string[];
    };
    expect(pkg.license).toBe('Apache-2.0');
    expect(pkg.files).toContain('LICENSE');
    const text = readFileSync(path.join(repoRoot, 'LICENSE'), 'utf8');
    expect(text).toMatch(/^\s*Apache License\n\s*Version 2\.0, January 2004\n/);
    for (let section = 1; section <= 9; section++) expect(text).toContain(`${section}. `);
    expect(text).toContain('END OF TERMS AND CONDITIONS');
  });
});
