// The Markdown report, checked structurally: header and credential kind, summary counts per
// environment, banners, collapsible details with field-level before/after, drift in its own
// section, truncation at GitHub's limit with the summary intact, escaping, and no secrets.
import { describe, expect, it } from 'vitest';
import { classifyDrift } from '../../src/plan/drift.js';
import type { Operation } from '../../src/plan/types.js';
import {
  commentMarker,
  GITHUB_COMMENT_LIMIT,
  renderDriftMarkdown,
  renderPlanMarkdown,
} from '../../src/report/markdown.js';
import { renderDriftText, renderPlanJson, renderPlanText } from '../../src/report/index.js';
import { makePlan, mixedPlan, op } from '../support/plans.js';

const RAW = 'kmsc_' + 'A'.repeat(43);
const PROJECT_KEY = 'sk_live_' + 'b'.repeat(32);

/** Rows of the first Markdown table after a heading, as arrays of cells. */
function table(md: string, heading: string): string[][] {
  const at = md.indexOf(heading);
  expect(at, `missing ${heading}`).toBeGreaterThanOrEqual(0);
  const lines = md.slice(at).split('\n');
  const start = lines.findIndex((l) => l.startsWith('|'));
  const rows: string[][] = [];
  for (const l of lines.slice(start)) {
    if (!l.startsWith('|')) break;
    rows.push(
      l
        .split('|')
        .slice(1, -1)
        .map((c) => c.trim()),
    );
  }
  return rows;
}

const count = (s: string, sub: string) => s.split(sub).length - 1;

describe('plan Markdown', () => {
  const md = renderPlanMarkdown(mixedPlan(), { marker: commentMarker('abc123'), drift: classifyDrift(mixedPlan()) });

  it('starts with the hidden marker and names the target, environments and credential kind', () => {
    expect(md.startsWith('<!-- kms-sync:abc123 -->\n')).toBe(true);
    expect(md).toContain(
      '**Target:** <code>https&#58;//kms.example/api/v1</code> · **Credential:** <code>sk_test_</code> (test) · **Environments:** <code>shop-production</code>, <code>shop-staging</code>',
    );
    expect(md).not.toContain('[!CAUTION]');
    const live = renderPlanMarkdown(mixedPlan('live'));
    expect(live).toContain('<code>sk_live_</code> (live)');
    expect(live).toContain('> [!CAUTION]');
  });

  it('has a summary table of counts per environment and a total', () => {
    expect(table(md, '#### Summary')).toEqual([
      ['Environment', 'Create', 'Update', 'Replace', 'Rotate', 'Delete', 'Unmanaged'],
      ['---', '--:', '--:', '--:', '--:', '--:', '--:'],
      ['<code>shop-production</code>', '1', '1', '1', '1', '0', '1'],
      ['<code>shop-staging</code>', '1', '0', '0', '0', '1', '0'],
      ['**Total**', '2', '1', '1', '1', '1', '1'],
    ]);
    expect(md).toContain('**Plan:** 2 to create, 1 to update, 1 to replace, 1 to rotate, 1 to delete.');
  });

  it('warns about deletes, replacements and rotations, naming each', () => {
    const banner = md.slice(md.indexOf('> [!WARNING]'), md.indexOf('#### Summary'));
    expect(banner).toContain('**This plan deletes 1, replaces 1 and rotates 1 resource(s).**');
    expect(banner).toContain('<code>client.shop-staging/old</code>');
    expect(banner).toContain('<code>endpoint.shop-production/GET:/v1/orders</code>');
    expect(banner).toContain('<code>key.shop-production/globex/primary</code>');
    expect(banner).not.toContain('client.shop-production/hooli');
    const calm = renderPlanMarkdown(
      makePlan({ operations: [op({ address: 'client.shop-production/a', action: 'create' })] }),
    );
    expect(calm).not.toContain('[!WARNING]');
  });

  it('puts each operation in a collapsible section with field-level before/after', () => {
    const changes = md.slice(md.indexOf('#### Changes'), md.indexOf('#### Drift and findings'));
    expect(count(changes, '<details><summary>')).toBe(6);
    expect(count(changes, '</details>')).toBe(6);
    const update = changes.slice(changes.indexOf('<code>client.shop-production/globex</code>'));
    expect(table(update, '| Field | Before | After |').slice(2, 3)).toEqual([
      ['<code>ipWhitelist</code>', '<code>["0.0.0.0/0"]</code>', '<code>["10.0.0.0/8"]</code>'],
    ]);
    expect(changes).toContain(
      '<code>keys</code> | <code>main</code>: no expiry, autoRotate false → default store as <code>shop-production/hooli/main</code>',
    );
  });

  it('shows drift that the operations do not already show in its own section', () => {
    const drift = md.slice(md.indexOf('#### Drift and findings'));
    expect(drift).toContain('##### Unmanaged (1)');
    expect(drift).toContain('<code>endpoint.shop-production/GET:/sdk/x</code>');
    expect(drift).toContain('##### Secret missing (1)');
    expect(drift).toContain('##### Expiring (1)');
    expect(drift).not.toContain('client.shop-staging/old'); // a delete: shown under Changes
  });

  it('says there are no changes', () => {
    const none = renderPlanMarkdown(makePlan());
    expect(none).toContain('**No changes.**');
    expect(none).not.toContain('<details>');
    expect(none).not.toContain('[!WARNING]');
  });
});

describe('drift Markdown', () => {
  const report = classifyDrift(mixedPlan());
  const md = renderDriftMarkdown(report, { marker: commentMarker('d1') });

  it('summarises each category per environment, then lists drift by category', () => {
    expect(table(md, '#### Summary')).toEqual([
      ['Environment', 'Changed outside', 'Pending', 'Missing', 'Unmanaged', 'Secret missing', 'Expiring', 'Total'],
      ['---', '--:', '--:', '--:', '--:', '--:', '--:', '--:'],
      ['<code>shop-production</code>', '2', '0', '1', '1', '0', '1', '5'],
      ['<code>shop-staging</code>', '0', '0', '1', '1', '1', '0', '3'],
      ['**Total**', '2', '0', '2', '2', '1', '1', '8'],
    ]);
    const order = [
      '#### Drift',
      '##### Changed outside kms-sync (2)',
      '##### Missing from the live service (2)',
      '##### Unmanaged (2)',
      '##### Secret missing (1)',
      '##### Expiring (1)',
    ];
    const at = order.map((h) => md.indexOf(h));
    expect(at.every((x) => x > 0)).toBe(true);
    expect([...at].sort((a, b) => a - b)).toEqual(at);
    expect(md).toContain('| <code>ipWhitelist</code> | <code>["0.0.0.0/0"]</code> | <code>["10.0.0.0/8"]</code> |');
    expect(md).toContain('> **Applying the desired state would delete, replace or rotate 3 resource(s):**');
  });

  it('says so when there is no drift, and counts ignored items', () => {
    const clean = renderDriftMarkdown({
      ...classifyDrift(makePlan()),
      summary: { ...classifyDrift(makePlan()).summary, ignored: 2 },
      ignore: { source: '.kmsignore', rules: 2, unused: [] },
    });
    expect(clean).toContain('**No drift.**');
    expect(clean).toContain('_Ignored by <code>.kmsignore</code>: 2 item(s)');
    expect(clean).not.toContain('[!WARNING]');
  });
});

describe('size limit', () => {
  const big = (n: number) => {
    const ops: Operation[] = [];
    for (let i = 0; i < n; i++) {
      const env = i % 2 ? 'shop-production' : 'shop-staging';
      ops.push(
        op({
          address: `client.${env}/client-${String(i).padStart(5, '0')}`,
          action: i % 10 === 0 ? 'delete' : 'update',
          changes: [
            { path: 'metadata.notes', before: 'x'.repeat(150), after: 'y'.repeat(150) },
            { path: 'ipWhitelist', before: ['0.0.0.0/0'], after: ['10.0.0.0/8'] },
          ],
        }),
      );
    }
    return makePlan({ operations: ops });
  };

  it('truncates details, never the summary, stays under 65,536 characters and says so', () => {
    const plan = big(3000);
    const md = renderPlanMarkdown(plan, { marker: commentMarker('big') });
    expect(md.length).toBeLessThanOrEqual(GITHUB_COMMENT_LIMIT);
    expect(md.length).toBeGreaterThan(GITHUB_COMMENT_LIMIT - 2000);
    expect(table(md, '#### Summary').at(-1)).toEqual(['**Total**', '0', '2700', '0', '0', '300', '0']);
    expect(md).toContain('**Plan:** 0 to create, 2700 to update, 0 to replace, 0 to rotate, 300 to delete.');
    const shown = count(md, '<details><summary>');
    expect(shown).toBe(count(md, '</details>'));
    const note = /\*\*Details truncated:\*\* (\d+) of 3000 resource\(s\) not shown/.exec(md);
    expect(note).not.toBeNull();
    expect(shown + Number(note![1])).toBe(3000);
    expect(md.trimEnd().endsWith('</sub>')).toBe(true);
    // The banner lists the first deletes and says how many more there are.
    expect(md).toContain('> - … and 285 more');
  });

  it('truncates drift reports the same way, and honours a smaller limit', () => {
    const md = renderDriftMarkdown(classifyDrift(big(500)), { maxChars: 20_000 });
    expect(md.length).toBeLessThanOrEqual(20_000);
    expect(table(md, '#### Summary').at(-1)).toEqual(['**Total**', '450', '0', '0', '50', '0', '0', '500']);
    expect(md).toMatch(/\*\*Details truncated:\*\* \d+ of 500 item\(s\) not shown/);
  });

  it('does not truncate what fits', () => {
    const md = renderPlanMarkdown(big(20));
    expect(md).not.toContain('Details truncated');
    expect(count(md, '<details><summary>')).toBe(20);
  });
});

describe('safety', () => {
  const hostile = makePlan({
    credential: 'live',
    operations: [
      op({
        address: 'client.shop-production/<img src=x onerror=alert(1)>',
        action: 'update',
        reason: 'metadata changed by @octocat',
        changes: [
          { path: 'metadata.note', before: `leaked ${RAW}`, after: '</code></details><script>x</script> | `tick`' },
        ],
      }),
      op({
        address: 'key.shop-production/a/main',
        action: 'create',
        after: { name: 'main', secret: { name: 'shop-production/a/main' } },
      }),
    ],
    warnings: [`credential ${PROJECT_KEY} in a warning`],
  });
  const plan = {
    ...hostile,
    target: { ...hostile.target, url: 'https://user:hunter2@kms.example/api/v1?api_key=zzz' },
  };
  const outputs = [renderPlanMarkdown(plan, { drift: classifyDrift(plan) }), renderDriftMarkdown(classifyDrift(plan))];

  it('never contains a raw key, a project key or URL credentials', () => {
    for (const md of outputs) {
      expect(md).not.toMatch(/kmsc_(?!(?:&#91;|\[)REDACTED)/); // only the marker may follow the prefix
      expect(md).not.toContain('AAAAAAAA');
      expect(md).not.toContain(PROJECT_KEY);
      expect(md).not.toMatch(/sk_live_[A-Za-z0-9]{4,}/);
      expect(md).not.toContain('hunter2');
      expect(md).not.toContain('api_key');
    }
  });

  it('escapes markup and mentions from names and values', () => {
    for (const md of outputs) {
      expect(md).not.toContain('<img');
      expect(md).not.toContain('<script>');
      expect(md).not.toContain('@octocat');
      expect(count(md, '<details>')).toBe(count(md, '</details>'));
    }
  });
});

describe("kms-sync's own markers", () => {
  // A claimed client: its owner marker changes with a real field; another op changes the marker only.
  const plan = makePlan({
    operations: [
      op({
        address: 'client.shop-production/globex',
        action: 'update',
        changes: [
          { path: 'metadata.kms-sync/owner', before: null, after: 'github.com/acme/shop:kms' },
          { path: 'metadata.team', before: 'a', after: 'b' },
        ],
      }),
      op({
        address: 'client.shop-production/initech',
        action: 'update',
        changes: [{ path: 'metadata.kms-sync/applied', before: '1', after: '2' }],
      }),
    ],
  });
  it('are left out of text, Markdown and drift views, and kept in JSON', () => {
    const views = [
      renderPlanText(plan, { color: false }),
      renderPlanMarkdown(plan, { drift: classifyDrift(plan) }),
      renderDriftMarkdown(classifyDrift(plan)),
      renderDriftText(classifyDrift(plan), { color: false }),
    ];
    for (const v of views) {
      expect(v).not.toMatch(/kms-sync\/owner|kms-sync\/applied/);
      expect(v).toContain('metadata.team');
    }
    expect(views[0]).toContain("(only kms-sync's own markers change (owner and last-applied record))");
    expect(renderPlanJson(plan)).toContain('metadata.kms-sync/owner');
  });
});

describe('security changes', () => {
  const recipient = 'age1' + 'q'.repeat(58);
  const store = (i: number, options: Record<string, unknown> = {}) => ({
    kind: 'store_added' as const,
    store: `s${i}`,
    value: `sops:s${i}.sops.yaml ${JSON.stringify(options)}`,
    recipients: (options.recipients as string[] | undefined) ?? [],
  });

  it('lists every change, and the recipients of a store line it cuts', () => {
    const note = 'x '.repeat(400);
    const plan = {
      ...makePlan(),
      security: [...Array.from({ length: 40 }, (_, i) => store(i)), store(40, { note, recipients: [recipient] })],
    };
    const md = renderPlanMarkdown(plan);
    expect(md).toContain('Security changes (41)');
    expect(count(md, '> - store s')).toBe(41);
    expect(md).toContain(`(declares the recipients ${recipient})`);
  });

  it('past the room a comment has for them, ends the list saying not to approve from the comment', () => {
    const long = 'y'.repeat(280);
    const plan = { ...makePlan(), security: Array.from({ length: 200 }, (_, i) => store(i, { note: long })) };
    const md = renderPlanMarkdown(plan);
    expect(md.length).toBeLessThan(GITHUB_COMMENT_LIMIT);
    expect(md).toMatch(
      /> - \*\*… and \d+ more security change\(s\), not shown to stay under the comment size limit: do not approve from this comment/,
    );
  });
});
