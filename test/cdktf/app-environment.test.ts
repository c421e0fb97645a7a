// Issue 26 item 7: the CDKTF app is code from the configuration's repository (a pull request's
// included) and runs even for offline commands (`validate --cdktf`). It gets none of the
// credentials kms-sync holds, and a failing app's output is echoed with them redacted. Mounted
// against the built CLI with an app that records its environment and then prints secrets.
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { appEnvironment } from '../../src/cdktf/synth.js';
import { runCli, workspace } from '../support/cli.js';

const SECRETS: Record<string, string> = {
  KMS_API_KEY: 'sk_live_' + 'Pr0jectK3y'.repeat(3),
  VAULT_TOKEN: 'hvs.' + 'V4ult'.repeat(5),
  GITHUB_TOKEN: 'ghs_' + 'W0rkfl0w'.repeat(4),
  AWS_SECRET_ACCESS_KEY: 'aws' + 'Cl0udS3cret'.repeat(3),
  DEPLOY_DB_PASSWORD: 'pw' + 'Hunter2x'.repeat(3),
  SOME_URL: 'https://user:' + 'UrlPa55'.repeat(3) + '@db.example/x',
};

const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

describe("the CDKTF app runs without kms-sync's credentials", () => {
  it('validate --cdktf: the app sees none of them, and its failing output is redacted', async () => {
    // The app records its environment, then echoes what it was given and fails.
    const app = `
      const fs = require('node:fs');
      fs.writeFileSync('seen.json', JSON.stringify(process.env));
      console.error('env dump:', ${JSON.stringify(Object.keys(SECRETS))}.map((k) => process.env[k]).join(' '));
      console.error('guessed:', ${JSON.stringify(Object.values(SECRETS))}.join(' '));
      process.exit(3);`;
    const dir = workspace({
      'cdktf.json': JSON.stringify({ language: 'typescript', app: 'node app.cjs', context: {} }),
      'app.cjs': app,
    });
    dirs.push(dir);
    const r = await runCli(['validate', '--cdktf', dir], { env: { ...SECRETS, STAGE: 'pr-42' } });
    expect(r.code).not.toBe(0);
    expect(r.stderr).toContain('failed with exit code 3');
    const seen = JSON.parse(readFileSync(path.join(dir, 'seen.json'), 'utf8')) as Record<string, string>;
    for (const k of Object.keys(SECRETS)) expect(seen[k], k).toBeUndefined();
    expect(seen.STAGE).toBe('pr-42');
    for (const v of Object.values(SECRETS)) {
      expect(JSON.stringify(seen)).not.toContain(v);
      expect(r.stdout + r.stderr).not.toContain(v);
    }
    expect(r.stderr).toContain('[REDACTED KMS_API_KEY]');
  });

  it('appEnvironment removes credentials by name, shape of name and value; keeps the rest', () => {
    const { env, removed } = appEnvironment({
      PATH: '/bin',
      HOME: '/h',
      NODE_OPTIONS: '',
      CI_JOB_TOKEN: 'x',
      MY_API_KEY: 'y',
      X: 'sk_test_abcdef',
      STAGE: 'prod',
    });
    expect(Object.keys(env).sort()).toEqual(['HOME', 'NODE_OPTIONS', 'PATH', 'STAGE']);
    expect([...removed.keys()].sort()).toEqual(['CI_JOB_TOKEN', 'MY_API_KEY', 'X']);
  });
});
