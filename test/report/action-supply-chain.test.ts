// Issue 26 item 8: the GitHub Action's supply chain. setup-node is pinned by commit SHA, `version`
// defaults to this release, and the CLI is installed so that the repository's .npmrc (which a pull
// request can add) cannot choose the registry. Mounted by running the action's own script in a
// checkout whose .npmrc points at a logging server, with an `npm` on PATH that records where and
// how it ran and asks the real npm which registry those settings resolve to.
import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { repoRoot } from '../support/cli.js';
import { scratchDir } from '../support/scratch.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any
const action = parse(readFileSync(path.join(repoRoot, 'action.yml'), 'utf8')) as any;
const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0)) await c();
});

describe('the GitHub Action', () => {
  it('pins every action it uses by commit SHA and defaults version to this release', () => {
    const uses = action.runs.steps.filter((s: { uses?: string }) => s.uses).map((s: { uses: string }) => s.uses);
    expect(uses.length).toBeGreaterThan(0);
    for (const u of uses) expect(u).toMatch(/^[\w.-]+\/[\w.-]+@[0-9a-f]{40}$/);
    const pkg = JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string };
    expect(action.inputs.version.default).toBe(pkg.version);
  });

  it("installs the CLI outside the checkout from registry.npmjs.org: the checkout's .npmrc is never used", async () => {
    const hits: string[] = [];
    const server = createServer((req, res) => { hits.push(req.url ?? ''); res.writeHead(404).end(); });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanup.push(() => new Promise((r) => server.close(r)));
    const evil = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;

    const root = scratchDir('kms-sync-action-');
    cleanup.push(() => rmSync(root, { recursive: true, force: true }));
    const checkout = path.join(root, 'checkout');
    const bin = path.join(root, 'bin');
    const log = path.join(root, 'log');
    const runnerTemp = path.join(root, 'runner-temp');
    for (const d of [checkout, bin, log, runnerTemp]) mkdirSync(d);
    writeFileSync(path.join(checkout, '.npmrc'), `registry=${evil}\n//127.0.0.1/:_authToken=stolen\n`);
    writeFileSync(path.join(checkout, 'kms-sync.yaml'), 'apiVersion: kms-sync/v1\nprojects: []\n');
    const realNpm = execFileSync('sh', ['-c', 'command -v npm'], { encoding: 'utf8' }).trim();
    // The stand-in npm: records its folder and arguments, resolves the registry those arguments
    // give in that folder (the real npm), and "installs" a kms-sync that prints its arguments.
    writeFileSync(path.join(bin, 'npm'), `#!/usr/bin/env bash
printf '%s\\n' "$PWD" > "$LOG/cwd"
printf '%s\\n' "$@" > "$LOG/args"
flags=()
for a in "$@"; do case "$a" in --registry=*|--userconfig=*) flags+=("$a") ;; esac; done
"$REAL_NPM" config get registry "\${flags[@]}" > "$LOG/registry" 2> "$LOG/registry.err"
mkdir -p node_modules/.bin
printf '#!/bin/sh\\necho "kms-sync $*"\\n' > node_modules/.bin/kms-sync
chmod +x node_modules/.bin/kms-sync
`);
    chmodSync(path.join(bin, 'npm'), 0o755);
    const script = action.runs.steps.find((s: { id?: string }) => s.id === 'run').run as string;
    const env = {
      PATH: `${bin}:${path.dirname(process.execPath)}:${path.dirname(realNpm)}:/usr/bin:/bin`, HOME: root, LOG: log, REAL_NPM: realNpm, RUNNER_TEMP: runnerTemp,
      // The real npm keeps its compile cache (and any temporary file) in this run's temporary folder.
      TMPDIR: tmpdir(), NODE_DISABLE_COMPILE_CACHE: '1',
      GITHUB_OUTPUT: path.join(log, 'output'), GITHUB_EVENT_NAME: 'push', INPUT_COMMAND: 'plan', INPUT_CONFIG: 'kms-sync.yaml',
      INPUT_ENVIRONMENTS: '', INPUT_COMMENT: 'github', INPUT_API_URL: '', INPUT_API_KEY: '', INPUT_VERSION: action.inputs.version.default,
      INPUT_FAIL_ON_DRIFT: 'false', INPUT_ALLOW_LOCAL_STORE: 'false', INPUT_ARGS: '', GITHUB_TOKEN: 'x',
    };
    const r = await new Promise<{ code: number; out: string }>((resolve) => {
      execFile('bash', ['-c', script], { cwd: checkout, env }, (e, stdout, stderr) => resolve({ code: e ? Number((e as { code?: number }).code ?? 1) : 0, out: stdout + stderr }));
    });
    expect(r.code, r.out).toBe(0);
    const cwd = readFileSync(path.join(log, 'cwd'), 'utf8').trim();
    expect(path.relative(checkout, cwd).startsWith('..')).toBe(true);
    expect(cwd.startsWith(runnerTemp)).toBe(true);
    expect(readFileSync(path.join(log, "registry"), "utf8").trim(), readFileSync(path.join(log, "registry.err"), "utf8")).toBe("https://registry.npmjs.org/");
    expect(readFileSync(path.join(log, 'args'), 'utf8')).toContain(`kms-sync@${action.inputs.version.default}`);
    // The CLI itself still runs in the checkout, with the action's arguments.
    expect(r.out).toContain('kms-sync plan -f kms-sync.yaml --detailed-exitcode --format markdown');
    expect(hits).toEqual([]);
  });
});
