// --json means machine-readable stdout and nothing else: apply/rotate as a JSON-lines event stream
// checked against its schema, drift and secrets list as one JSON document.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allOutput, RAW_KEY_PATTERN, repoRoot, runCli } from '../support/cli.js';
import { setup, type Setup } from './helpers.js';

let s: Setup;
beforeAll(async () => {
  s = await setup();
});
afterAll(async () => {
  await s?.emu.close();
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});

const addFormats = (addFormatsModule as unknown as { default: (a: Ajv) => Ajv }).default;
const ajv = new Ajv({ allErrors: true, strict: false });
addFormats(ajv);
const validateEvent = ajv.compile(
  JSON.parse(readFileSync(path.join(repoRoot, 'schemas', 'kms-sync-apply-events.schema.json'), 'utf8')),
);

function events(stdout: string): any[] {
  const lines = stdout.split('\n').filter((l) => l !== '');
  return lines.map((l) => {
    const e = JSON.parse(l);
    expect(validateEvent(e), `${l}\n${JSON.stringify(validateEvent.errors)}`).toBe(true);
    return e;
  });
}

describe('apply --json / rotate --json', () => {
  it('apply writes only JSON lines to stdout: version, planned changes, start/complete per operation, key stored, summary', async () => {
    const r = await runCli(['apply', '--json', '--auto-approve', '-f', 'kms-sync.yaml'], { cwd: s.dir, env: s.env });
    expect(r.code, r.stderr).toBe(0);
    const ev = events(r.stdout);
    expect(ev[0]).toMatchObject({ type: 'version', command: 'apply', format_version: '1.0' });
    const planned = ev.filter((e) => e.type === 'planned_change').map((e) => e.change.address);
    expect(planned).toContain('client.shop-staging/web');
    const summaryOfPlan = ev.find((e) => e.type === 'change_summary');
    expect(summaryOfPlan.changes.total).toBe(planned.length);
    for (const address of planned) {
      expect(ev.some((e) => e.type === 'apply_start' && e.change.address === address)).toBe(true);
      expect(ev.some((e) => e.type === 'apply_complete' && e.change.address === address)).toBe(true);
    }
    const stored = ev.filter((e) => e.type === 'key_stored').map((e) => e.key);
    expect(stored.map((k) => k.address).sort()).toEqual(['key.shop-staging/app/main', 'key.shop-staging/web/main']);
    for (const k of stored) expect(Object.keys(k).sort()).toEqual(['address', 'secret', 'store']);
    const last = ev.at(-1);
    expect(last).toMatchObject({
      type: 'apply_summary',
      outcome: 'complete',
      exit_code: 0,
      keys_stored: 2,
      failed: [],
    });
    expect(r.stdout).not.toContain('Apply complete!');
    expect(r.stdout).not.toMatch(RAW_KEY_PATTERN);
  });

  it('a second apply --json has nothing to do and still ends with a summary', async () => {
    const r = await runCli(['apply', '--json', '--auto-approve', '-f', 'kms-sync.yaml'], { cwd: s.dir, env: s.env });
    expect(r.code, r.stderr).toBe(0);
    const ev = events(r.stdout);
    expect(ev.filter((e) => e.type === 'planned_change')).toEqual([]);
    expect(ev.at(-1)).toMatchObject({ type: 'apply_summary', outcome: 'nothing_to_do', exit_code: 0 });
  });

  it('rotate --json streams the rotation and the new key stored', async () => {
    const r = await runCli(
      ['rotate', '--json', '--auto-approve', '-f', 'kms-sync.yaml', '--key', 'key.shop-staging/web/main'],
      { cwd: s.dir, env: s.env },
    );
    expect(r.code, r.stderr).toBe(0);
    const ev = events(r.stdout);
    expect(ev[0]).toMatchObject({ type: 'version', command: 'rotate' });
    expect(
      ev.some(
        (e) =>
          e.type === 'apply_complete' &&
          e.change.action === 'rotate' &&
          e.change.address === 'key.shop-staging/web/main',
      ),
    ).toBe(true);
    expect(ev.filter((e) => e.type === 'key_stored').map((e) => e.key.address)).toEqual(['key.shop-staging/web/main']);
    expect(ev.at(-1)).toMatchObject({ type: 'apply_summary', outcome: 'complete', keys_stored: 1 });
  });
});

describe('one JSON document', () => {
  it('drift --json is clean JSON on stdout (exit 0 without drift)', async () => {
    const r = await runCli(['drift', '--json', '-f', 'kms-sync.yaml', '--no-usage'], { cwd: s.dir, env: s.env });
    expect(r.code, r.stderr).toBe(0);
    expect(JSON.parse(r.stdout)).toMatchObject({ kind: 'kms-sync/drift', drift: false });
  });

  it('secrets list --json lists names and dates, never values', async () => {
    const r = await runCli(['secrets', 'list', '--json', '-f', 'kms-sync.yaml'], { cwd: s.dir, env: s.env });
    expect(r.code, r.stderr).toBe(0);
    const doc = JSON.parse(r.stdout);
    expect(doc.secrets.length).toBeGreaterThanOrEqual(2);
    for (const x of doc.secrets) expect(Object.keys(x)).not.toContain('value');
    expect(r.stdout).not.toMatch(RAW_KEY_PATTERN);
  });

  it('plan --json --format markdown is a usage error, before any request', async () => {
    const r = await runCli(['plan', '--json', '--format', 'markdown', '-f', 'kms-sync.yaml'], {
      cwd: s.dir,
      env: { ...s.env, KMS_API_URL: 'http://127.0.0.1:9/api/v1' },
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('--json and --format markdown');
    expect(r.stdout).toBe('');
  });
});
