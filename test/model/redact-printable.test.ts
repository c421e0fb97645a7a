// The one redaction (model/redact.ts) and the one escaping of hostile text (model/printable.ts).
import { describe, expect, it } from 'vitest';
import { cutLongValues, guardOutput, mayGuard, printable, quoted } from '../../src/model/printable.js';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import {
  batchRedaction,
  credentialValues,
  holdsCredential,
  isCredentialEnvName,
  leadsToCredential,
  redactCredentials,
  registerSecret,
} from '../../src/model/redact.js';
import { redactReport } from '../../src/report/redact.js';
import { safeUriForMessage } from '../../src/secrets/store.js';
import { repoRoot } from '../support/cli.js';

const KEY = 'sk_live_' + 'Abc123'.repeat(4);
const TOKEN = 'ghs_' + 'T0k'.repeat(10);

describe('redaction by value', () => {
  const env = {
    KMS_API_KEY: KEY,
    GITHUB_TOKEN: TOKEN,
    MY_SERVICE_PASSWORD: 'hunter2hunter2',
    VAULT_ADDR: 'https://u:p4ss%40w0rd@vault.example',
    HOME: '/home/someone',
    CI: 'true',
  };

  it('masks every known credential, also embedded in longer strings and in JSON or URL spelling', () => {
    const text = `x${KEY}y ${TOKEN.slice(0, 4)}-${TOKEN}z "hunter2hunter2" p4ss%40w0rd p4ss@w0rd ${JSON.stringify('hunter2hunter2')}`;
    const out = redactCredentials(text, env);
    expect(out).not.toContain(KEY);
    expect(out).not.toContain(TOKEN);
    expect(out).not.toContain('hunter2');
    expect(out).not.toContain('w0rd');
    expect(out).toContain('x[REDACTED KMS_API_KEY]y');
    expect(out).toContain('[REDACTED MY_SERVICE_PASSWORD]');
    expect(redactCredentials('/home/someone is true', env)).toBe('/home/someone is true');
  });

  it('masks by shape what it does not know by value', () => {
    expect(redactCredentials(`a glpat-${'x'.repeat(20)} b ghp_${'y'.repeat(36)} c kmsc_${'z'.repeat(43)}`, {})).toBe(
      'a [REDACTED GitLab token] b [REDACTED GitHub token] c kmsc_[REDACTED]',
    );
    expect(redactCredentials(`id-xsk_live_${'Q1'.repeat(8)}-end risk_test_suite`, {})).toBe(
      'id-xsk_live_[REDACTED]-end risk_test_suite',
    );
    expect(
      redactCredentials('{"private_key":"-----BEGIN PRIVATE KEY-----\\nMIIE\\n-----END PRIVATE KEY-----\\n"}', {}),
    ).toBe('{"private_key":"[REDACTED private key]\\n"}');
  });

  it('writes every redacted value one way: [REDACTED] or [REDACTED what], after a prefix that is no secret', () => {
    const text = `${KEY} sk_test_abcdEFGH1234 kmsc_${'z'.repeat(43)} AGE-SECRET-KEY-1QQQQQQQQQQ glpat-${'x'.repeat(20)}`;
    const marker = /\[REDACTED(?: [A-Za-z_ ]+)?\]/g;
    for (const out of [
      redactCredentials(text, env),
      redactReport(text),
      safeUriForMessage('vault://user:hunter2hunter2@vault.example/kv'),
    ]) {
      expect(out.match(marker)?.length, out).toBeGreaterThan(0);
      expect(out.replace(marker, ''), out).not.toMatch(/redacted|\*\*\*|hunter2|…/i);
    }
    expect(redactReport(`kmsc_${'z'.repeat(43)}`)).toBe('kmsc_[REDACTED]');
    expect(safeUriForMessage('vault://user:pw@vault.example/kv')).toBe('vault://[REDACTED]@vault.example/kv');
    // No other spelling anywhere in the sources (model/redact.ts holds the one marker).
    const files = (dir: string): string[] =>
      readdirSync(dir, { withFileTypes: true }).flatMap((d) =>
        d.isDirectory() ? files(path.join(dir, d.name)) : d.name.endsWith('.ts') ? [path.join(dir, d.name)] : [],
      );
    for (const f of files(path.join(repoRoot, 'src'))) {
      expect(readFileSync(f, 'utf8'), f).not.toMatch(
        /\[redacted\]|\*\*\*@|\[REDACTED customer key\]|<redacted>|\(sensitive\)/,
      );
    }
  });

  it('knows credential variables by name, with a safe list of suffixes', () => {
    for (const n of [
      'KMS_API_KEY',
      'GITHUB_TOKEN',
      'CI_JOB_TOKEN',
      'VAULT_TOKEN',
      'AWS_SECRET_ACCESS_KEY',
      'AZURE_CLIENT_SECRET',
      'SOPS_AGE_KEY',
      'DB_PASSWORD',
      'STRIPE_SECRET',
      'X_API_KEY',
      'SENTRY_DSN',
      'VAULT_SECRET_ID',
    ]) {
      expect(isCredentialEnvName(n), n).toBe(true);
    }
    for (const n of [
      'HOME',
      'PATH',
      'PWD',
      'KMS_API_URL',
      'AWS_ACCESS_KEY_ID',
      'SOPS_AGE_KEY_FILE',
      'GOOGLE_APPLICATION_CREDENTIALS_FILE',
      'MONKEY',
      'TOKENIZER_MODE',
      'OWNER',
    ]) {
      expect(isCredentialEnvName(n), n).toBe(false);
    }
    expect(credentialValues({ A_TOKEN: 'short' })).toEqual([]); // too short to mask ordinary text
    expect(holdsCredential(`copy ${KEY}`, {})).toBe(true);
    expect(holdsCredential('plain text', env)).toBe(false);
  });

  it('reads the environment at every call: a credential set, changed or added after a line was redacted is redacted in the next', () => {
    const live: NodeJS.ProcessEnv = { HOME: '/home/someone', DEPLOY_TOKEN: 'first-token-Qz7vR2mW' };
    expect(redactCredentials('a first-token-Qz7vR2mW b', live)).toBe('a [REDACTED DEPLOY_TOKEN] b');
    live.DEPLOY_TOKEN = 'second-token-Zt5bN8cV';
    expect(redactCredentials('second-token-Zt5bN8cV', live)).toBe('[REDACTED DEPLOY_TOKEN]');
    live.DB_PASSWORD = 'hunter2hunter2';
    live.HTTPS_PROXY = 'http://proxy:p4ssw0rd-in-url@proxy.example';
    expect(holdsCredential('x hunter2hunter2 y', live)).toBe(true);
    expect(redactCredentials('hunter2hunter2 p4ssw0rd-in-url', live)).toBe(
      '[REDACTED DB_PASSWORD] [REDACTED HTTPS_PROXY]',
    );
    // The process's own environment, the default, too.
    const name = 'KMS_SYNC_REDACT_TEST_TOKEN';
    expect(redactCredentials('late-token-Wy2gF9dS')).toBe('late-token-Wy2gF9dS');
    process.env[name] = 'late-token-Wy2gF9dS';
    try {
      expect(redactCredentials('late-token-Wy2gF9dS')).toBe(`[REDACTED ${name}]`);
    } finally {
      delete process.env[name];
    }
  });
});

describe('redaction of a batch of output (cli/output.ts)', () => {
  it('reads the environment once per batch and keeps masking a credential whose variable changed or went since', () => {
    const name = 'KMS_SYNC_BATCH_TEST_TOKEN';
    process.env[name] = 'batch-token-Hq3wE8rT';
    try {
      expect(batchRedaction().each('a batch-token-Hq3wE8rT b')).toBe(`a [REDACTED ${name}] b`);
      process.env[name] = 'batch-token-Jx6yU1iO';
      const after = batchRedaction();
      expect(after.each('batch-token-Hq3wE8rT batch-token-Jx6yU1iO')).toBe(`[REDACTED ${name}] [REDACTED ${name}]`);
      delete process.env[name];
      expect(batchRedaction().each('batch-token-Jx6yU1iO')).toBe(`[REDACTED ${name}]`);
    } finally {
      delete process.env[name];
    }
  });

  it('says a joined text is untouched only when no piece of it would change, whatever the cut (3,000 random texts)', () => {
    registerSecret('batch-raw-Pm4nB7vC', 'raw key');
    const env = { DEPLOY_TOKEN: 'deploy-Zt5bN8cVx' };
    const r = batchRedaction(env);
    const parts = [
      'plain ',
      'client.shop/web: create complete\n',
      'ri',
      'sk_live_',
      'abcd1234',
      'kmsc_',
      'AbCdEfGh12',
      'deploy-Zt5',
      'bN8cVx',
      'batch-raw-',
      'Pm4nB7vC',
      '-----BEGIN PRIVATE KEY-----',
      ':',
      '::error::x\n',
      '##',
      '[',
      '\x1b[2J',
      '\r\x1b[2K',
      ' ',
    ];
    let seed = 7;
    const next = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    let untouched = 0;
    for (let i = 0; i < 3000; i++) {
      const pieces = Array.from({ length: 1 + next(6) }, () =>
        Array.from({ length: 1 + next(3) }, () => parts[next(parts.length)]).join(''),
      );
      const joined = pieces.join('');
      if (r.untouched(joined)) {
        untouched++;
        for (const p of pieces) expect(r.each(p), JSON.stringify(pieces)).toBe(p);
      }
      if (!mayGuard(joined)) for (const p of pieces) expect(guardOutput(p), JSON.stringify(pieces)).toBe(p);
    }
    expect(untouched).toBeGreaterThan(100);
  });
});

describe('redaction of encoded spellings (issue 34)', () => {
  it('of registered values sharing their first characters, masks the longest that matches whatever order they came in', () => {
    // Keys of one service share a prefix, so their hex spellings share a head: the candidates of
    // one head stay longest first as they are inserted.
    const base = 'kmsc_headshared';
    const lengths = [3, 9, 1, 12, 6, 2, 10];
    const values = lengths.map((n, i) => base + String.fromCharCode(97 + i).repeat(n));
    for (const v of values) registerSecret(v, 'raw key');
    for (const v of values) {
      expect(redactCredentials(`before ${v} after`, {})).toBe('before [REDACTED raw key] after');
      const hex = Buffer.from(v).toString('hex');
      expect(redactCredentials(`x${hex}y`, {})).not.toContain(hex.slice(0, 16));
    }
  });

  it('of registered values that begin one another, masks the longest whatever order they came in', () => {
    const base = 'kmsc_prefixed';
    const values = [4, 0, 11, 2, 7].map((n) => base + 'x'.repeat(n));
    for (const v of values) registerSecret(v, 'raw key');
    for (const v of values) expect(redactCredentials(`<${v}>`, {})).toBe('<[REDACTED raw key]>');
    expect(redactCredentials(`<${base}xxxxxxxxxxxxx>`, {})).toBe('<[REDACTED raw key]xx>');
  });

  it('masks base64, base64url, hex and upper-cased forms of a credential, also inside a longer encoded text', () => {
    const token = 'T0ken-' + 'Zq9xWv3Lp'.repeat(3);
    const env = { DEPLOY_TOKEN: token };
    const b = Buffer.from(token);
    for (const form of [
      b.toString('base64'),
      b.toString('base64url'),
      b.toString('hex'),
      b.toString('hex').toUpperCase(),
      token.toUpperCase(),
      Buffer.from(`user:${token}`).toString('base64'),
      Buffer.from(`ab${token}`).toString('base64'),
    ]) {
      const out = redactCredentials(`Authorization: Basic ${form} end`, env);
      expect(out, form).toContain('[REDACTED DEPLOY_TOKEN]');
      expect(out, form).not.toContain(form);
    }
  });

  it('a registered value (a raw key of any format) is masked in every spelling, in one pass however many are registered', () => {
    const raws = Array.from({ length: 2000 }, (_, i) => `r${i}-` + 'Kq8ZmW1v'.repeat(4));
    for (const r of raws) registerSecret(r, 'raw key');
    const last = raws.at(-1)!;
    const text = `echo ${last} ${Buffer.from(last).toString('hex')} ${Buffer.from(last).toString('base64url')} done`;
    expect(redactCredentials(text, {})).toBe('echo [REDACTED raw key] [REDACTED raw key] [REDACTED raw key] done');
    expect(holdsCredential(`x${raws[7]}y`, {})).toBe(true);
    // Upper- and lower-cased (a service or a tool may echo it so), and a value with characters JSON escapes.
    const mid = raws[1000]!;
    expect(redactCredentials(`${mid.toUpperCase()} ${mid.toLowerCase()}`, {})).toBe(
      '[REDACTED raw key] [REDACTED raw key]',
    );
    const quoted = 'pass "Wq3zL8nR5tY2" word';
    registerSecret(quoted, 'token');
    expect(redactCredentials(JSON.stringify({ v: quoted }), {})).toBe('{"v":"[REDACTED token]"}');
  });

  it("a registered value's hex and base64 spellings are masked in the first text that could hold one, however many could not before", () => {
    const raw = `kmsc_${'Rk9vYmFy'.repeat(5)}q`;
    registerSecret(raw, 'raw key');
    const line = 'client.create-production/client-00042: create complete';
    for (let i = 0; i < 20; i++) expect(redactCredentials(line, {})).toBe(line);
    const b = Buffer.from(raw);
    // The shortest encoded spelling (the whole groups of one byte alignment) alone, then inside longer encoded texts.
    const [shortest] = [0, 1, 2]
      .map((align) =>
        Buffer.concat([Buffer.alloc(align), b])
          .toString('base64')
          .slice(align === 0 ? 0 : align + 1, Math.floor((b.length + align) / 3) * 4),
      )
      .sort((x, y) => x.length - y.length);
    expect(redactCredentials(`a ${shortest} b`, {})).toBe('a [REDACTED raw key] b');
    const basic = Buffer.concat([Buffer.from('user:'), b]).toString('base64');
    expect(redactCredentials(`Authorization: Basic ${basic}`, {})).toContain('[REDACTED raw key]');
    expect(redactCredentials(`x ${b.toString('hex').toUpperCase()} y`, {})).toBe('x [REDACTED raw key] y');
    const later = `kmsc_${'WmFwcGVk'.repeat(5)}r`;
    registerSecret(later, 'raw key');
    expect(holdsCredential(Buffer.from(later).toString('hex'), {})).toBe(true);
    registerSecret(`kmsc_${'TGlzdGVk'.repeat(5)}s`, 'raw key');
    expect(credentialValues({}).map(([v]) => v)).toContain(
      Buffer.from(`kmsc_${'TGlzdGVk'.repeat(5)}s`).toString('base64'),
    );
  });

  it('a registered value is found wherever the scan meets it: first, last, back to back, after other text of any script', () => {
    const [a, b, c] = ['Qz7vR2mW9xK4pL1n', 'Zt5bN8cV3xM6kJ0h', 'Wy2gF9dS4aP7lO3i'].map((v) => `scan-${v}`);
    for (const v of [a, b, c]) registerSecret(v!, 'raw key');
    const R = '[REDACTED raw key]';
    expect(redactCredentials(`${a}`, {})).toBe(R);
    expect(redactCredentials(`${a}${b}${c}`, {})).toBe(`${R}${R}${R}`);
    expect(redactCredentials(`é🙂 ${'x'.repeat(100)}${a}.${b} ü ${c}`, {})).toBe(
      `é🙂 ${'x'.repeat(100)}${R}.${R} ü ${R}`,
    );
    // A value cut short is not one (and what surrounds it is left alone).
    expect(redactCredentials(`${a!.slice(0, -1)} ${b!.slice(1)}`, {})).toBe(`${a!.slice(0, -1)} ${b!.slice(1)}`);
  });

  it('one predicate: what is a credential, and what leads to one (kept from the CDKTF app, not redacted)', () => {
    for (const n of [
      'PGPASSWORD',
      'MYSQL_PWD',
      'DOCKERHUB_PAT',
      'LDAP_BIND_PW',
      'SLACK_WEBHOOK_URL',
      'KUBE_CONFIG_DATA',
    ])
      expect(isCredentialEnvName(n), n).toBe(true);
    for (const n of [
      'SOPS_AGE_KEY_FILE',
      'AWS_ACCESS_KEY_ID',
      'GIT_CONFIG_VALUE_0',
      'KUBECONFIG',
      'SSH_AUTH_SOCK',
      'ACTIONS_ID_TOKEN_REQUEST_URL',
      'AZURE_CLIENT_CERTIFICATE_PATH',
    ]) {
      expect(leadsToCredential(n), n).toBe(true);
    }
    for (const n of ['HOME', 'PATH', 'PWD', 'STAGE', 'NODE_OPTIONS', 'CI']) expect(leadsToCredential(n), n).toBe(false);
  });
});

describe('printable', () => {
  it('escapes controls, escape sequences, bidi and invisible characters, and doubles backslashes', () => {
    expect(printable('a\x1b]0;t\x07b\r\n\u202e\u200bc\\n\u009b')).toBe(
      'a\\u001b]0;t\\u0007b\\r\\n\\u202e\\u200bc\\\\n\\u009b',
    );
    expect(printable('old ##[error]x')).toBe('old #\\u0023[error]x');
    expect(quoted('say "hi"\n')).toBe('"say \\"hi\\"\\n"');
    expect(quoted('plain')).toBe(JSON.stringify('plain'));
  });

  it('guards output lines: no workflow command starts a line, only colour and the progress line erase pass', () => {
    expect(guardOutput('ok\n::error::x\n  ::add-mask::y\n')).toBe('ok\n\\::error::x\n  \\::add-mask::y\n');
    expect(guardOutput('\x1b[31mred\x1b[0m\r\x1b[2Kline')).toBe('\x1b[31mred\x1b[0m\r\x1b[2Kline');
    expect(guardOutput('a\x1b[2Jb\rc\u202ed')).toBe('a\\u001b[2Jb\\u000dc\\u202ed');
  });

  it('cuts long values in error lines and says how many more', () => {
    const v = 'y'.repeat(1000);
    expect(cutLongValues(`bad value "${v}" at x`)).toBe(`bad value "${'y'.repeat(200)}…" (800 more) at x`);
    expect(cutLongValues(`bad ${v}`)).toBe(`bad ${'y'.repeat(200)}… (800 more)`);
    expect(cutLongValues('short "v"')).toBe('short "v"');
  });
});
