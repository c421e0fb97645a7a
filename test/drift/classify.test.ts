// classifyDrift and .kmsignore as pure functions over Plan objects built directly (including the
// key findings and rotate operations the planner adds), so every category and the no-double-count
// rule are covered without a service.
import { describe, expect, it } from 'vitest';
import { classifyDrift, generateIgnore, type DriftReport } from '../../src/plan/drift.js';
import { IgnoreParseError, matchField, parseIgnore } from '../../src/plan/ignore.js';
import { makePlan, mixedPlan, op } from '../support/plans.js';

const pairs = (r: DriftReport) => r.items.map((i) => [i.category, i.address, i.action]);

describe('classifyDrift', () => {
  it('maps operations, unmanaged resources and key findings to the six categories', () => {
    const r = classifyDrift(mixedPlan());
    expect(pairs(r)).toEqual([
      ['changed_outside', 'client.shop-production/globex', 'update'],
      ['changed_outside', 'endpoint.shop-production/GET:/v1/orders', 'replace'],
      ['missing', 'client.shop-production/hooli', 'create'],
      ['missing', 'client.shop-staging/hooli', 'create'],
      ['unmanaged', 'client.shop-staging/old', 'delete'],
      ['unmanaged', 'endpoint.shop-production/GET:/sdk/x', null],
      ['secret_missing', 'key.shop-staging/globex/main', null],
      // The rotate operation and the expiring finding of the same key are one item.
      ['expiring', 'key.shop-production/globex/primary', 'rotate'],
    ]);
    expect(r.items[0]!.fields).toEqual([{ path: 'ipWhitelist', before: ['0.0.0.0/0'], after: ['10.0.0.0/8'] }]);
    expect(r.summary).toMatchObject({
      total: 8,
      changed_outside: 2,
      missing: 2,
      unmanaged: 2,
      secret_missing: 1,
      expiring: 1,
      ignored: 0,
    });
    expect(r.summary.byEnv['shop-production']).toEqual({
      total: 5,
      changed_outside: 2,
      pending: 0,
      missing: 1,
      unmanaged: 1,
      secret_missing: 0,
      expiring: 1,
    });
    expect(r.summary.byEnv['shop-staging']).toEqual({
      total: 3,
      changed_outside: 0,
      pending: 0,
      missing: 1,
      unmanaged: 1,
      secret_missing: 1,
      expiring: 0,
    });
  });

  it('treats rotate operations as their key-finding category, without findings too, and skips forced rotations', () => {
    const plan = makePlan({
      operations: [
        op({ address: 'key.shop-production/a/k', action: 'rotate', actionReason: 'rotate_secret_missing' }),
        op({ address: 'key.shop-production/b/k', action: 'rotate', actionReason: 'rotate_expiring' }),
        op({ address: 'key.shop-production/c/k', action: 'rotate', actionReason: 'rotate_forced' }),
        op({ address: 'key.shop-production/d/k', action: 'delete', actionReason: 'delete_rotated_out' }),
      ],
      keyFindings: [
        {
          address: 'key.shop-production/a/k',
          projectEnv: 'shop-production',
          finding: 'secret_missing',
          detail: 'not in its store',
          rotationPlanned: true,
        },
        {
          address: 'key.shop-production/e/k',
          projectEnv: 'shop-production',
          finding: 'expired',
          detail: 'expired on …',
          rotationPlanned: false,
        },
      ],
    });
    const r = classifyDrift(plan);
    expect(pairs(r)).toEqual([
      ['secret_missing', 'key.shop-production/a/k', 'rotate'],
      ['expiring', 'key.shop-production/b/k', 'rotate'],
      ['expiring', 'key.shop-production/e/k', null],
    ]);
    expect(r.summary.total).toBe(3);
  });

  it('reports no drift for an empty plan', () => {
    const r = classifyDrift(makePlan());
    expect(r.items).toEqual([]);
    expect(r.summary.total).toBe(0);
    expect(Object.keys(r.summary.byEnv)).toEqual(['shop-production', 'shop-staging']);
  });
});

describe('.kmsignore', () => {
  const rules = parseIgnore(
    [
      '# accepted drift',
      'client.shop-staging/*            # any client of staging',
      'endpoint.*/GET:/sdk/**',
      'client.shop-production/globex:metadata',
      'key.*/*/*:expiresAt',
      'endpoint.shop-production/POST:/v1/orders:cancel',
      '',
    ].join('\n'),
    '.kmsignore',
  );

  it('parses addresses, field paths and comments; a colon in an endpoint path stays in the address', () => {
    expect(rules.rules.map((r) => [r.line, r.address, r.field])).toEqual([
      [2, 'client.shop-staging/*', undefined],
      [3, 'endpoint.*/GET:/sdk/**', undefined],
      [4, 'client.shop-production/globex', 'metadata'],
      [5, 'key.*/*/*', 'expiresAt'],
      [6, 'endpoint.shop-production/POST:/v1/orders:cancel', undefined],
    ]);
  });

  it('matches * within a segment, ** across segments, and field rules cover their children', () => {
    const a = (s: string) => rules.rules.find((r) => r.field === undefined && r.addressRe.test(s))?.line;
    expect(a('client.shop-staging/old')).toBe(2);
    expect(a('key.shop-staging/old/main')).toBeUndefined();
    expect(a('endpoint.shop-production/GET:/sdk/a/b')).toBe(3);
    expect(a('endpoint.shop-production/GET:/v1/sdk')).toBeUndefined();
    expect(matchField(rules, 'client.shop-production/globex', 'metadata.team')?.line).toBe(4);
    expect(matchField(rules, 'client.shop-production/globex', 'ipWhitelist')).toBeUndefined();
    expect(matchField(rules, 'key.shop-production/globex/primary', 'expiresAt')?.line).toBe(5);
  });

  it('counts ignored items and fields instead of dropping them, and lists rules that matched nothing', () => {
    const plan = makePlan({
      operations: [
        op({
          address: 'client.shop-production/globex',
          action: 'update',
          changes: [
            { path: 'ipWhitelist', before: [], after: ['10.0.0.0/8'] },
            { path: 'metadata.team', before: 'a', after: 'b' },
          ],
        }),
        op({ address: 'client.shop-staging/old', action: 'delete' }),
        op({
          address: 'key.shop-production/globex/primary',
          action: 'update',
          changes: [{ path: 'expiresAt', before: null, after: '2030-01-01T00:00:00Z' }],
        }),
      ],
      unmanaged: [
        {
          address: 'endpoint.shop-production/GET:/sdk/x',
          kind: 'endpoint',
          projectEnv: 'shop-production',
          note: 'kept',
        },
      ],
    });
    const r = classifyDrift(plan, rules);
    expect(pairs(r)).toEqual([['changed_outside', 'client.shop-production/globex', 'update']]);
    expect(r.items[0]!.fields.map((f) => f.path)).toEqual(['ipWhitelist']);
    expect(r.items[0]!.ignoredFields).toEqual([
      { path: 'metadata.team', rule: '.kmsignore:4: client.shop-production/globex:metadata' },
    ]);
    expect(r.summary).toMatchObject({ total: 1, ignored: 3, ignoredFields: 1 });
    expect(r.ignored.map((i) => [i.address, i.rule])).toEqual([
      ['key.shop-production/globex/primary', '.kmsignore:5: key.*/*/*:expiresAt'],
      ['client.shop-staging/old', '.kmsignore:2: client.shop-staging/*'],
      ['endpoint.shop-production/GET:/sdk/x', '.kmsignore:3: endpoint.*/GET:/sdk/**'],
    ]);
    expect(r.ignore.unused).toEqual(['.kmsignore:6: endpoint.shop-production/POST:/v1/orders:cancel']);
  });

  it('rejects lines that are not addresses, with file:line', () => {
    expect(() => parseIgnore('client.a/b\nglobex\nclient.a/b c\n', 'x.kmsignore')).toThrow(IgnoreParseError);
    try {
      parseIgnore('client.a/b\nglobex\n', 'x.kmsignore');
    } catch (e) {
      expect((e as Error).message).toContain('x.kmsignore:2: "globex" is not a resource address');
    }
  });

  it('--gen-ignore output ignores exactly the current drift and appends to an existing file', () => {
    const plan = mixedPlan();
    const text = generateIgnore(classifyDrift(plan), '# mine\nclient.shop-production/hooli\n');
    expect(text.startsWith('# mine\nclient.shop-production/hooli\n\n# kms-sync drift --gen-ignore')).toBe(true);
    expect(text.match(/^client\.shop-production\/hooli$/gm)).toHaveLength(1);
    expect(text).toContain('client.shop-production/globex:ipWhitelist\n');
    const after = classifyDrift(plan, parseIgnore(text, '.kmsignore'));
    expect(after.items).toEqual([]);
    expect(after.summary.ignored).toBe(8);
    expect(generateIgnore(after, text)).toBe(text);
  });
});
