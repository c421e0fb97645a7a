// Issue 25: the owner id does not move under the user's feet. A configuration without `owner:`
// applied in a plain folder, which then becomes a git checkout with a remote (what every team
// does next), never plans as "No changes" while its edits are blocked: the run stops with exit 1
// naming both ids and the fixes; declaring the recorded id makes the edit plan as a change.
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { setup, smallConfig, type Setup } from './helpers.js';

let s: Setup | undefined;
afterEach(async () => {
  await s?.emu.close();
});

describe('owner id and blocked changes', () => {
  it('a folder that becomes a git checkout stops the plan, naming both ids, until the recorded id is declared', async () => {
    s = await setup({ 'cfg/kms-sync.yaml': smallConfig });
    const cfg = path.join(s.dir, 'cfg');
    const cli = (args: string[]) => runCli(args, { env: { ...s!.env, KMS_SYNC_ALLOW_LOCAL_STORE: '1' }, cwd: s!.dir });
    const first = await cli(['apply', '-f', 'cfg', '--auto-approve']);
    expect(first.code, first.stdout + first.stderr).toBe(0);
    expect(readFileSync(path.join(cfg, '.kms-sync', 'owner'), 'utf8').trim()).toBe('local:cfg');

    execFileSync('git', ['init', '-q', cfg]);
    execFileSync('git', ['-C', cfg, 'remote', 'add', 'origin', 'https://github.com/acme/platform.git']);
    const edited = smallConfig.replace(
      '{ name: web, template: std,',
      '{ name: web, template: std, metadata: { team: checkout },',
    );
    writeFileSync(path.join(cfg, 'kms-sync.yaml'), edited);
    const moved = await cli(['plan', '-f', 'cfg', '--detailed-exitcode']);
    expect(moved.code, moved.stdout + moved.stderr).toBe(1);
    expect(moved.stderr).toContain("'local:cfg'");
    expect(moved.stderr).toContain("'github.com/acme/platform:.'");
    expect(moved.stderr).toContain('owner: "local:cfg"');
    expect(moved.stdout).not.toContain('No changes');

    writeFileSync(
      path.join(cfg, 'kms-sync.yaml'),
      edited.replace('apiVersion: kms-sync/v1\n', 'apiVersion: kms-sync/v1\nowner: local:cfg\n'),
    );
    const declared = await cli(['plan', '-f', 'cfg', '--detailed-exitcode']);
    expect(declared.code, declared.stdout + declared.stderr).toBe(2);
    expect(declared.stdout).toContain('metadata.team');
    expect(declared.stdout).not.toContain('owned by configuration');
  });

  it('changes another configuration owns are blocked: never "No changes", plan and apply exit 1 naming the owner', async () => {
    s = await setup({
      'a/kms-sync.yaml': `owner: team-a\n${smallConfig}`,
      'b/kms-sync.yaml': `owner: team-b\n${smallConfig}`,
    });
    const cli = (args: string[]) => runCli(args, { env: { ...s!.env, KMS_SYNC_ALLOW_LOCAL_STORE: '1' }, cwd: s!.dir });
    expect((await cli(['apply', '-f', 'a', '--auto-approve'])).code).toBe(0);
    // The same desired state under another owner: nothing to change, nothing blocked.
    const same = await cli(['plan', '-f', 'b', '--detailed-exitcode']);
    expect(same.code, same.stdout + same.stderr).toBe(0);
    expect(same.stdout).toContain('No changes.');
    writeFileSync(
      path.join(s.dir, 'b', 'kms-sync.yaml'),
      `owner: team-b\n${smallConfig.replace('{ name: web, template: std,', '{ name: web, template: std, metadata: { team: b },')}`,
    );
    for (const args of [
      ['plan', '-f', 'b', '--detailed-exitcode'],
      ['plan', '-f', 'b', '--json'],
      ['apply', '-f', 'b', '--auto-approve'],
    ]) {
      const r = await cli(args);
      expect(r.code, `${args.join(' ')}: ${r.stdout}${r.stderr}`).toBe(1);
      expect(r.stderr).toContain("client.shop-staging/web (metadata) is owned by configuration 'team-a'");
      expect(r.stderr).toContain('--take-ownership');
      expect(r.stdout).not.toContain('No changes.');
    }
    const plan = JSON.parse((await cli(['plan', '-f', 'b', '--json'])).stdout);
    expect(plan.unmanaged.find((u: any) => u.address === 'client.shop-staging/web').blocked).toEqual(['metadata']);
    const taken = await cli(['plan', '-f', 'b', '--take-ownership', '--detailed-exitcode']);
    expect(taken.code, taken.stdout + taken.stderr).toBe(2);
  });
});
