// File-system errors reach the user as sentences about their own paths: never a syscall, an errno
// or the name of one of kms-sync's temp files.
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { describeFsError, userPath } from '../../src/cli/fs-errors.js';
import { allOutput, RAW_KEY_PATTERN, runCli } from '../support/cli.js';
import { setup, smallConfig, type Setup } from './helpers.js';

let s: Setup;
beforeAll(async () => {
  s = await setup();
  writeFileSync(path.join(s.dir, 'notes'), 'a file, not a folder\n');
});
afterAll(async () => {
  await s?.emu.close();
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});

const noInternals = (text: string) => {
  expect(text).not.toMatch(/\.tmp\b|\btmp-\d|ENOENT|ENOTDIR|EEXIST|mkdir '|open '/);
};

it('plan --out into a folder that does not exist yet creates it, like Terraform -out', async () => {
  const r = await runCli(['plan', '--out', 'plans/today/plan.json'], { cwd: s.dir, env: s.env });
  expect(r.code, r.stderr).toBe(0);
  expect(existsSync(path.join(s.dir, 'plans/today/plan.json'))).toBe(true);
});

it('plan --out under a file names that file, not a temp file', async () => {
  const r = await runCli(['plan', '--out', 'notes/plan.json'], { cwd: s.dir, env: s.env });
  expect(r.code).toBe(1);
  expect(r.stderr).toContain('Error: cannot create the folder notes: a file of that name is in the way');
  noInternals(r.stderr);
});

it('a file where kms-sync keeps its lock and journal is named, with what the folder is for', async () => {
  const dir = path.join(s.dir, 'blocked');
  mkdirSync(dir);
  writeFileSync(path.join(dir, 'kms-sync.yaml'), smallConfig);
  writeFileSync(path.join(dir, '.kms-sync'), '');
  const r = await runCli(['apply', '--yes'], { cwd: dir, env: s.env });
  expect(r.code).toBe(1);
  expect(r.stderr).toContain(
    'Error: cannot create the folder .kms-sync (where kms-sync keeps its run lock and key journal): a file of that name is in the way',
  );
  noInternals(r.stderr);
});

it('init under a file says which path is wrong', async () => {
  const r = await runCli(['init', 'notes/kms.yaml'], { cwd: s.dir, env: {} });
  expect(r.code).toBe(1);
  expect(r.stderr).toContain('notes');
  expect(r.stderr).toContain('a file of that name is in the way');
  noInternals(r.stderr);
});

it('temp files are reported as the file they stand for; missing folders and blocking files are named', () => {
  expect(userPath('/p/plan.json.4711.tmp')).toBe('/p/plan.json');
  expect(userPath('/p/.keys.txt.tmp-4711-ab12cd')).toBe('/p/keys.txt');
  expect(userPath('/p/plan.json')).toBe('/p/plan.json');
  const cwd = s.dir;
  const enoent = Object.assign(new Error('x'), {
    code: 'ENOENT',
    syscall: 'open',
    path: path.join(cwd, 'gone/deeper/plan.json.99.tmp'),
  });
  expect(describeFsError(enoent, cwd)).toBe('cannot write gone/deeper/plan.json: the folder gone does not exist');
  const enotdir = Object.assign(new Error('x'), {
    code: 'ENOTDIR',
    syscall: 'open',
    path: path.join(cwd, 'notes/x/.secrets.yaml.tmp-1-ab'),
  });
  expect(describeFsError(enotdir, cwd)).toBe('cannot write notes/x/secrets.yaml: notes is a file, not a folder');
  const reading = Object.assign(new Error('x'), { code: 'ENOENT', syscall: 'open', path: '/nowhere/plan.json' });
  expect(describeFsError(reading, cwd)).toBe('/nowhere/plan.json: no such file or folder');
  expect(describeFsError(new Error('not an OS error'), cwd)).toBeUndefined();
});
