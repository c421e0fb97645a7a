// Issue 25: kms-sync's own outputs beside the configuration stay outputs. A saved plan (`plan
// --out`) and a JSON plan (`plan --json > file`) written into the configuration's folder name
// `"projects":` inside their target; they must never be read as configuration by -f of that folder.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { runCli } from '../support/cli.js';
import { setup, type Setup } from './helpers.js';

let s: Setup | undefined;
afterEach(async () => {
  await s?.emu.close();
});

describe('saved plans beside the configuration', () => {
  it('validate, plan and apply of the folder work with a saved plan and a JSON plan in it', async () => {
    s = await setup();
    const cli = (args: string[]) => runCli(args, { env: { ...s!.env, KMS_SYNC_ALLOW_LOCAL_STORE: '1' }, cwd: s!.dir });
    const saved = await cli(['plan', '-f', '.', '--out', 'plan.json']);
    expect(saved.code, saved.stdout + saved.stderr).toBe(0);
    const json = await cli(['plan', '-f', '.', '--json']);
    expect(json.code).toBe(0);
    writeFileSync(path.join(s.dir, 'plan-output.json'), json.stdout);

    const validate = await cli(['validate', '-f', '.']);
    expect(validate.code, validate.stdout + validate.stderr).toBe(0);
    expect(validate.stdout).toContain('1 file(s)');
    const plan = await cli(['plan', '-f', '.', '--detailed-exitcode']);
    expect(plan.code, plan.stdout + plan.stderr).toBe(2);
    const apply = await cli(['apply', 'plan.json', '--auto-approve']);
    expect(apply.code, apply.stdout + apply.stderr).toBe(0);
    const again = await cli(['apply', '-f', '.', '--auto-approve']);
    expect(again.code, again.stdout + again.stderr).toBe(0);
    expect(again.stdout).toContain('No changes');
  });
});
