// The sharded GitLab example (examples/ci/sharded/.gitlab-ci.yml) run for real with gitlab-ci-local
// (a dev dependency; jobs in the shell executor, each in its own folder, artifacts passed between
// them as GitLab passes them): 4 plan jobs of a `parallel: matrix` against the emulator over HTTP,
// then the report job, whose merge-request note (posted to a GitLab stand-in) is the Markdown plan
// of the whole fleet. Only the example's install step is replaced, by the built CLI on PATH. The
// checkout is a shallow clone of a merge request that adds a store with a new recipient and edits
// the trust record to hide it: each shard fetches the base and reports both against its records.
import { execFile, execFileSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { generateX25519Identity, identityToRecipient } from 'age-encryption';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { cliPath, repoRoot, runCli, workspace } from '../support/cli.js';
import { randomFleet } from '../support/fleet.js';
import { startGitLabFake, type GitLabFake } from '../support/gitlab-fake.js';
import { skipWhen } from '../support/skip.js';
import { patient } from '../support/patience.js';

const API_KEY = 'sk_test_glshard0123456789';
const TOKEN = 'glpat-' + 'q7W8e9'.repeat(4);
const gitlabCiLocal = path.join(repoRoot, 'node_modules', 'gitlab-ci-local', 'dist', 'index.js');
const has = (tool: string) => {
  try {
    execFileSync('sh', ['-c', `command -v ${tool}`], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
};
// gitlab-ci-local copies the checkout into each job's folder with rsync (Debian package rsync).
const missing = ['rsync', 'git', 'bash'].filter((t) => !has(t));

let emu: RunningEmulator;
let gl: GitLabFake;

beforeAll(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
  gl = await startGitLabFake({ projectId: '42', token: TOKEN, tokenHeader: 'private-token' });
});
afterAll(async () => {
  await gl?.close();
  await emu?.close();
});

const timeless = (s: string) => s.replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, '…');

describe('examples/ci/sharded/.gitlab-ci.yml', () => {
  it.skipIf(
    skipWhen(
      missing.length > 0 || !existsSync(gitlabCiLocal),
      `gitlab-ci-local needs ${missing.join(', ') || 'its npm package'} here`,
    ),
  )(
    'runs in gitlab-ci-local: 4 shard jobs, then one merged note that is the plan of the whole fleet',
    async () => {
      // The project: the fleet on main, its records as the last apply left them (no store declared).
      const upstream = workspace();
      mkdirSync(path.join(upstream, 'kms', '.kms-sync'), { recursive: true });
      mkdirSync(path.join(upstream, 'bin'));
      const fleet = randomFleet(3, 'gl3', (req) => emu.service.seed(req));
      writeFileSync(path.join(upstream, 'kms', 'kms-sync.yaml'), fleet);
      const trustRecord = path.join(upstream, 'kms', '.kms-sync', 'trust.json');
      writeFileSync(trustRecord, JSON.stringify({ version: 1, stores: {}, env: [] }));
      writeFileSync(
        path.join(upstream, 'bin', 'kms-sync'),
        `#!/bin/sh\nexec ${JSON.stringify(process.execPath)} ${JSON.stringify(cliPath)} "$@"\n`,
      );
      chmodSync(path.join(upstream, 'bin', 'kms-sync'), 0o755);
      copyFileSync(
        path.join(repoRoot, 'examples', 'ci', 'sharded', '.gitlab-ci.yml'),
        path.join(upstream, 'example.gitlab-ci.yml'),
      );
      // The example as a project includes it; its install (a release download) replaced by the built CLI.
      writeFileSync(
        path.join(upstream, '.gitlab-ci.yml'),
        'include:\n  - local: example.gitlab-ci.yml\n.kms-sync:\n  before_script:\n    - kms-sync --version\n',
      );
      const git = (cwd: string, ...args: string[]) =>
        execFileSync('git', ['-c', 'user.name=t', '-c', 'user.email=t@example.test', ...args], {
          cwd,
          stdio: 'pipe',
        })
          .toString()
          .trim();
      git(upstream, 'init', '-q', '-b', 'main');
      git(upstream, 'add', '-A');
      git(upstream, 'commit', '-qm', 'fleet');
      const base = git(upstream, 'rev-parse', 'HEAD');
      // The merge request: a store for a new recipient, and the record edited to hide it.
      const recipient = await identityToRecipient(await generateX25519Identity());
      git(upstream, 'checkout', '-q', '-b', 'mr');
      writeFileSync(
        path.join(upstream, 'kms', 'kms-sync.yaml'),
        fleet.replace(
          'apiVersion: kms-sync/v1\n',
          `apiVersion: kms-sync/v1\nstores:\n  - { name: audit, uri: "sops:audit.sops.yaml", options: { recipients: [${recipient}] } }\n`,
        ),
      );
      const audit = `sops:audit.sops.yaml {"recipients":["${recipient}"]}`;
      writeFileSync(trustRecord, JSON.stringify({ version: 1, stores: { audit }, env: [] }));
      git(upstream, 'commit', '-qam', 'mr: audit store');
      // Its pipeline's checkout, as GitLab clones it: shallow (GIT_DEPTH), the merge request's head
      // without its base. The example's fetch of origin reaches the upstream (same URL, rewritten).
      const dir = workspace();
      git(path.dirname(dir), 'clone', '-q', '--depth=1', '--no-tags', '-b', 'mr', `file://${upstream}`, dir);
      const originUrl = 'https://gitlab.example.test/group/fleet.git';
      git(dir, 'remote', 'set-url', 'origin', originUrl);
      git(dir, 'update-ref', 'refs/remotes/origin/main', 'HEAD');
      git(dir, 'symbolic-ref', 'refs/remotes/origin/HEAD', 'refs/remotes/origin/main');
      expect(() => git(dir, 'cat-file', '-e', `${base}^{commit}`)).toThrow();

      const variables = {
        CI_PIPELINE_SOURCE: 'merge_request_event',
        CI_API_V4_URL: gl.url,
        CI_PROJECT_ID: '42',
        CI_MERGE_REQUEST_IID: '7',
        CI_MERGE_REQUEST_DIFF_BASE_SHA: base,
        GITLAB_CI: 'true',
        GITLAB_TOKEN: TOKEN,
        KMS_API_URL: emu.url,
        KMS_API_KEY: API_KEY,
        GIT_CONFIG_COUNT: '1',
        GIT_CONFIG_KEY_0: `url.file://${upstream}.insteadOf`,
        GIT_CONFIG_VALUE_0: originUrl,
      };
      const r = await new Promise<{ code: number; out: string }>((resolve) => {
        execFile(
          process.execPath,
          [
            gitlabCiLocal,
            '--force-shell-executor',
            '--shell-isolation',
            '--ignore-predefined-vars',
            'CI_PIPELINE_SOURCE,CI_API_V4_URL,CI_PROJECT_ID,CI_MERGE_REQUEST_IID,CI_MERGE_REQUEST_DIFF_BASE_SHA,GITLAB_CI',
            ...Object.entries(variables).flatMap(([k, v]) => ['--variable', `${k}=${v}`]),
          ],
          {
            cwd: dir,
            timeout: patient(240_000),
            maxBuffer: 64 * 1024 * 1024,
            env: {
              PATH: `${path.join(dir, 'bin')}:${path.dirname(process.execPath)}:${process.env.PATH}`,
              HOME: dir,
              NO_COLOR: '1',
            },
          },
          (e, stdout, stderr) =>
            resolve({ code: e ? Number((e as { code?: number }).code ?? 1) : 0, out: stdout + stderr }),
        );
      });
      expect(r.code, r.out.slice(-3000)).toBe(0);
      for (const k of [1, 2, 3, 4]) expect(r.out).toMatch(new RegExp(`PASS +plan: \\[${k}/4\\]`));
      // The report job exits 2 (changes), which the example allows: "passed with warnings".
      expect(r.out).toMatch(/WARN +report/);
      expect(r.out).not.toContain(TOKEN);

      // Each shard compared the configuration with the base's records (fetched by the job), and
      // reports the new store and its recipient, and the edit of the record.
      const shardPlans = readdirSync(path.join(dir, '.gitlab-ci-local'), { recursive: true, encoding: 'utf8' })
        .filter((f) => /(^|\/)plan-\d\.json$/.test(f) && f.includes('artifacts'))
        .map((f) => JSON.parse(readFileSync(path.join(dir, '.gitlab-ci-local', f), 'utf8')));
      expect(shardPlans).toHaveLength(4);
      for (const plan of shardPlans) {
        expect(plan.trust_base).toBe(`${base} (${base.slice(0, 12)})`);
        expect(plan.security_changes).toEqual(
          expect.arrayContaining([
            expect.objectContaining({ kind: 'store_added', store: 'audit', value: audit }),
            expect.objectContaining({ kind: 'record_edited' }),
          ]),
        );
        expect(plan.security_changes.map((c: { kind: string }) => c.kind)).not.toContain('trust_base_unreadable');
      }

      // One note on the merge request: the Markdown plan of the whole fleet, as one plan prints it
      // against the same base.
      git(dir, 'fetch', '-q', '--no-tags', '--depth=1', `file://${upstream}`, base);
      const whole = await runCli(['plan', '-f', 'kms/', '--format', 'markdown'], {
        cwd: dir,
        env: { KMS_API_URL: emu.url, KMS_API_KEY: API_KEY, KMS_SYNC_TRUST_BASE: base },
      });
      expect(whole.stdout).toContain('store audit: new');
      expect(whole.code, whole.stderr).toBe(0);
      expect(gl.notes.map((n) => n.mr)).toEqual([7]);
      expect(timeless(gl.notes[0]!.body)).toBe(timeless(whole.stdout));
      const artifact = path.join(dir, '.gitlab-ci-local', 'artifacts', 'report', 'plan.md');
      expect(timeless(readFileSync(artifact, 'utf8'))).toBe(timeless(whole.stdout));
    },
    patient(300_000),
  );
});
