// Markdown reports for pull/merge-request comments and CI step summaries: a header naming the
// target, a warning banner for destructive work, a summary table per environment, per-resource
// details in collapsible sections, and drift in its own section. The whole comment stays under
// GitHub's 65,536-character limit: details are truncated (and the report says so), never the
// summary. Everything that comes from configuration or the live service is HTML-escaped and shown
// as code, so a resource name can neither inject markup nor mention anyone.
import {
  CATEGORY_TITLE,
  DRIFT_CATEGORIES,
  type DriftCategory,
  type DriftItem,
  type DriftReport,
} from '../plan/drift.js';
import { escapeUnsafe, printable } from '../model/printable.js';
import {
  blockedChanges,
  describeSecurityChange,
  type Action,
  type KeyAfter,
  type Operation,
  type Plan,
  type SecurityChange,
} from '../plan/types.js';
import {
  keyTerms,
  MARKERS_ONLY_NOTE,
  revokedKeys,
  shownAttributes,
  shownChanges,
  withoutMarkerFields,
} from './present.js';
import { describeUsage } from './drift-text.js';
import { redactReport, safeUrl } from './redact.js';

/** GitHub's limit on an issue or pull-request comment body. */
export const GITHUB_COMMENT_LIMIT = 65_536;

export interface MarkdownOptions {
  /** Hidden marker identifying the comment to update in place (see commentMarker). */
  marker?: string;
  /** Maximum length of the whole document, in UTF-16 code units (at least the number of characters). */
  maxChars?: number;
  /** Plan reports: drift found while planning (unmanaged resources, key findings) in its own section. */
  drift?: DriftReport;
  /** The command a reader runs for the full output, named in the truncation note. */
  fullCommand?: string;
}

export const commentMarker = (id: string) => `<!-- kms-sync:${id} -->`;

const SYMBOL: Record<Action, string> = { create: '+', update: '~', delete: '-', replace: '-/+', rotate: '↻' };
const VERB: Record<Action, string> = {
  create: 'will be created',
  update: 'will be updated in place',
  delete: 'will be destroyed',
  replace: 'must be replaced',
  rotate: 'will be rotated',
};
const DRIFT_SYMBOL: Record<DriftCategory, string> = {
  changed_outside: '~',
  pending: '>',
  missing: '+',
  unmanaged: '?',
  secret_missing: '!',
  expiring: '⏲',
};

// ------------------------------------------------------------------ escaping

/**
 * Links, images and autolinks cannot form: `](` and `][` (a link's text meeting its target), `![`
 * (an image), the `:` of `scheme://` and the `.` of `www.`. Inside `<code>` GitHub still renders
 * Markdown, so a name like `[x](https://evil)` or `![](https://tracker)` would otherwise render.
 */
const noLinks = (s: string) =>
  s
    .replace(/\](?=[([])/g, '&#93;')
    .replace(/!(?=\[|&#91;)/g, '&#33;')
    .replace(/:(?=\/\/)/g, '&#58;')
    .replace(/\b(www)\./gi, '$1&#46;');

/** Text for HTML and Markdown contexts: no tags, no table breaks, no @mentions, no emphasis, no links. */
export function escapeText(s: string): string {
  return noLinks(
    escapeUnsafe(s.replace(/\r?\n/g, ' '))
      .replace(/&/g, '&amp;')
      .replace(/</g, '&lt;')
      .replace(/>/g, '&gt;')
      .replace(/"/g, '&quot;')
      .replace(/\|/g, '&#124;')
      .replace(/@/g, '&#64;')
      .replace(/`/g, '&#96;')
      .replace(/[\\*_[\]~]/g, (c) => `&#${c.charCodeAt(0)};`)
      .replace(/\r?\n/g, ' '),
  );
}

/** A value as inline code (HTML), shortened when long; controls and bidi characters shown escaped (model/printable.ts). */
function code(raw: string, max = 200): string {
  const s = redactReport(raw); // before shortening, so a cut can never leave part of a key
  const text = s.length > max ? `${s.slice(0, max - 1)}…` : s;
  const shown = printable(text.replace(/\r?\n/g, '⏎'));
  // Backslashes as entities: Markdown would read `\\` (how printable shows one) as an escaped backslash.
  return `<code>${noLinks(shown.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/\|/g, '&#124;').replace(/@/g, '&#64;').replace(/\\/g, '&#92;'))}</code>`;
}

const short = (raw: string, max = 400) => {
  const s = redactReport(raw);
  return s.length > max ? `${s.slice(0, max - 1)}…` : s;
};

const json = (v: unknown) => (v === undefined ? 'null' : (JSON.stringify(v) ?? 'null'));

// ------------------------------------------------------------------ shared parts

function targetLine(target: Plan['target']): string {
  const cred =
    target.credential === 'live'
      ? '<code>sk_live_</code> (live)'
      : target.credential === 'test'
        ? '<code>sk_test_</code> (test)'
        : 'unknown kind';
  const envs = target.envs.length ? target.envs.map((e) => code(e)).join(', ') : '(none)';
  return `**Target:** ${code(safeUrl(target.url))} · **Credential:** ${cred} · **Environments:** ${envs} · **Owner:** ${code(target.owner)}`;
}

function liveBanner(target: Plan['target']): string[] {
  if (target.credential !== 'live') return [];
  return ['> [!CAUTION]', '> **Live credential (`sk_live_`):** these environments serve production traffic.'];
}

/** At most `max` list lines, then one saying how many more there are. */
function capList(lines: string[], prefix: string, max = 15): string[] {
  return lines.length > max ? [...lines.slice(0, max), `${prefix}… and ${lines.length - max} more`] : lines;
}

interface Block {
  group?: string;
  text: string;
}

/**
 * head + as many blocks as fit + (truncation note) + tail, within max. Group headings go out with
 * the first block of their group that fits. The head (summary) is never cut.
 */
function assemble(head: string, blocks: Block[], tail: string, max: number, what: string, fullCommand: string): string {
  const SEP = '\n\n';
  const note = (omitted: number) =>
    `> [!NOTE]\n> **Details truncated:** ${omitted} of ${blocks.length} ${what} not shown, to stay under GitHub's ${GITHUB_COMMENT_LIMIT.toLocaleString('en-US')}-character comment limit. ` +
    `The summary above is complete; run \`${fullCommand}\` for every detail.`;
  const reserve = note(blocks.length).length + SEP.length;
  let used = head.length + 1 + (tail ? SEP.length + tail.length : 0); // + the final newline
  const shown: string[] = [];
  let lastGroup: string | undefined;
  let i = 0;
  for (; i < blocks.length; i++) {
    const b = blocks[i]!;
    const piece = (b.group !== undefined && b.group !== lastGroup ? `${b.group}${SEP}` : '') + b.text;
    const remaining = blocks.length - i - 1;
    // The last block needs no room for a note; any earlier one must leave room for it.
    const need = SEP.length + piece.length + (remaining > 0 ? reserve : 0);
    if (used + need > max) break;
    shown.push(piece);
    used += SEP.length + piece.length;
    lastGroup = b.group ?? lastGroup;
  }
  const parts = [head, ...shown];
  if (i < blocks.length) parts.push(note(blocks.length - i));
  if (tail) parts.push(tail);
  return parts.join(SEP) + '\n';
}

function fieldTable(headers: [string, string] | [string, string, string], rows: string[][]): string {
  if (!rows.length) return '';
  return [
    `| ${headers.join(' | ')} |`,
    `|${headers.map(() => '---').join('|')}|`,
    ...rows.map((r) => `| ${r.join(' | ')} |`),
  ].join('\n');
}

/** A collapsible section; a plain list line when there is nothing to unfold. */
function details(summary: string, body: string[]): string {
  const inner = body.filter(Boolean);
  if (!inner.length) return `- ${summary}`;
  return `<details><summary>${summary}</summary>\n\n${inner.join('\n\n')}\n\n</details>`;
}

// ------------------------------------------------------------------ plans

/**
 * Room for the security section in one comment. Each change is shown up to this size in all (a
 * reviewer approves from this list, so it is never cut at a count a configuration could pad past);
 * beyond it (only a configuration made to be long gets there) the list ends with a line that
 * says not to approve from the comment.
 */
const SECURITY_SECTION_MAX = 32_000;

/** The security changes as the comment's list lines (see SECURITY_SECTION_MAX). */
function securityLines(security: readonly SecurityChange[], fullCommand: string): string[] {
  const lines: string[] = [];
  let used = 0;
  for (const [i, c] of security.entries()) {
    const line = `> - ${escapeText(shownSecurityChange(c))}`;
    if (used + line.length > SECURITY_SECTION_MAX) {
      lines.push(
        `> - **… and ${security.length - i} more security change(s), not shown to stay under the comment size limit: do not approve from this comment; run \`${fullCommand}\` for all of them.**`,
      );
      break;
    }
    lines.push(line);
    used += line.length + 1;
  }
  return lines;
}

/**
 * One security change, cut at 300 characters. A store's line shows its options sorted by name, so
 * a long option could push the recipients it declares past the cut: after a cut they are listed.
 */
function shownSecurityChange(c: SecurityChange): string {
  const whole = describeSecurityChange(c);
  const cut = short(whole, 300);
  if (!cut.endsWith('…') || (c.kind !== 'store_added' && c.kind !== 'store_changed')) return cut;
  // A change without its recipients (a plan saved by an older build): not cut where one could hide.
  if (c.recipients === undefined) return short(whole, SECURITY_SECTION_MAX);
  return c.recipients.length
    ? `${cut} (declares the recipients ${c.recipients.map((r) => short(r, 100)).join(', ')})`
    : cut;
}

function opBody(op: Operation): string[] {
  if (op.action === 'create') {
    const after = shownAttributes(op.after);
    const keys = after.keys as (KeyAfter & { secret?: KeyAfter['secret'] })[] | undefined;
    delete after.keys;
    const secret = op.kind === 'key' ? (after.secret as { store?: string; name: string } | undefined) : undefined;
    if (secret) delete after.secret;
    const rows = Object.entries(after).map(([k, v]) => [code(k), code(json(v))]);
    if (keys)
      rows.push([
        code('keys'),
        keys
          .map(
            (k) =>
              `${code(k.name)}: ${escapeText(keyTerms(k))} → ${k.secret ? `${escapeText(k.secret.store ?? 'default store')} as ${code(k.secret.name)}` : 'secret store'}`,
          )
          .join('<br>'),
      ]);
    if (secret)
      rows.push([
        code('secret'),
        `raw value goes to ${escapeText(secret.store ?? 'the default store')} as ${code(secret.name)}`,
      ]);
    return [fieldTable(['Field', 'Value'], rows)];
  }
  if (op.action === 'delete') {
    const before = shownAttributes(op.before);
    const revoked = revokedKeys(op);
    if (revoked) delete before.keys;
    const rows = Object.entries(before).map(([k, v]) => [code(k), code(json(v))]);
    if (revoked)
      rows.push([code('keys'), revoked.length ? `revoked: ${revoked.map((n) => code(n)).join(', ')}` : 'none']);
    return [fieldTable(['Field', 'Current value'], rows)];
  }
  if (op.action === 'rotate' && op.changes.length === 0) {
    // The current key and its successor: same name, a new expiry, the raw value to the store.
    const before = op.before ?? {};
    const after = { ...(op.after ?? {}) };
    const secret = after.secret as { store?: string; name: string } | undefined;
    delete after.secret;
    const names = [...new Set([...Object.keys(before), ...Object.keys(after)])];
    const rows = names.map((k) => [code(k), code(json(before[k] ?? null)), code(json(after[k] ?? null))]);
    if (secret)
      rows.push([
        code('secret'),
        '',
        `new raw value goes to ${escapeText(secret.store ?? 'the default store')} as ${code(secret.name)}`,
      ]);
    return [fieldTable(['Field', 'Current key', 'New key'], rows)];
  }
  const { changes, markersOnly } = shownChanges(op);
  if (markersOnly) return [escapeText(`(${MARKERS_ONLY_NOTE})`)];
  return [
    fieldTable(
      ['Field', 'Before', 'After'],
      changes.map((c) => [code(c.path), code(json(c.before)), code(json(c.after))]),
    ),
  ];
}

function opBlock(op: Operation): Block {
  const flags = [op.protected ? '🔒 protected' : '', op.issuesKeys ? `issues ${op.issuesKeys} key(s)` : '']
    .filter(Boolean)
    .join(', ');
  const summary = `<code>${SYMBOL[op.action]}</code> ${code(op.address)} ${VERB[op.action]}: ${escapeText(op.reason)}${flags ? ` (${flags})` : ''}`;
  return { text: details(summary, opBody(op)) };
}

type Counts = Record<Action, number> & { unmanaged: number };
const zero = (): Counts => ({ create: 0, update: 0, replace: 0, rotate: 0, delete: 0, unmanaged: 0 });

function planSummaryTable(plan: Plan, compact: boolean): string {
  const rows = new Map<string, Counts>();
  for (const e of plan.target.envs) rows.set(e, zero());
  const bucket = (op: Operation) => op.projectEnv ?? `${op.project ?? op.address.replace(/^project\./, '')} (project)`;
  for (const op of plan.operations) {
    const c = rows.get(bucket(op)) ?? zero();
    c[op.action]++;
    rows.set(bucket(op), c);
  }
  for (const u of plan.unmanaged) {
    const c = rows.get(u.projectEnv) ?? zero();
    c.unmanaged++;
    rows.set(u.projectEnv, c);
  }
  const total = zero();
  for (const c of rows.values()) for (const k of Object.keys(total) as (keyof Counts)[]) total[k] += c[k];
  const line = (name: string, c: Counts) =>
    `| ${name} | ${c.create} | ${c.update} | ${c.replace} | ${c.rotate} | ${c.delete} | ${c.unmanaged} |`;
  const sorted = [...rows].sort(([a], [b]) => (a < b ? -1 : 1));
  return [
    '| Environment | Create | Update | Replace | Rotate | Delete | Unmanaged |',
    '|---|--:|--:|--:|--:|--:|--:|',
    ...(compact ? [] : sorted.map(([env, c]) => line(code(env), c))),
    line(compact ? `**Total** (${sorted.length} environments; rows omitted to fit)` : '**Total**', total),
  ].join('\n');
}

function planHead(plan: Plan, o: MarkdownOptions, compact: boolean): string {
  const s = plan.summary;
  const parts: string[] = [];
  if (o.marker) parts.push(o.marker);
  parts.push(`### kms-sync plan`, targetLine(plan.target));
  const live = liveBanner(plan.target);
  if (live.length) parts.push(live.join('\n'));
  const risky = plan.operations.filter(
    (op) => op.action === 'delete' || op.action === 'replace' || op.action === 'rotate',
  );
  if (risky.length) {
    const what = [
      s.delete ? `deletes ${s.delete}` : '',
      s.replace ? `replaces ${s.replace}` : '',
      s.rotate ? `rotates ${s.rotate}` : '',
    ].filter(Boolean);
    const sentence = what.length > 1 ? `${what.slice(0, -1).join(', ')} and ${what.at(-1)}` : what[0];
    parts.push(
      [
        '> [!WARNING]',
        `> **This plan ${sentence} resource(s).** Deleting or replacing revokes access and resets usage stats; rotating issues new keys. Review before merging:`,
        ...capList(
          risky.map(
            (op) => `> - <code>${SYMBOL[op.action]}</code> ${code(op.address)}: ${escapeText(short(op.reason, 200))}`,
          ),
          '> - ',
        ),
      ].join('\n'),
    );
  }
  const security = plan.security ?? [];
  if (security.length) {
    parts.push(
      [
        '> [!CAUTION]',
        `> **Security changes (${security.length}):** who can read keys, where store credentials go, what the configuration reads` +
          (plan.trustBase ? ` (compared with the base ${code(plan.trustBase)})` : '') +
          '. Review them:',
        ...securityLines(security, o.fullCommand ?? 'kms-sync plan'),
      ].join('\n'),
    );
  }
  parts.push('#### Summary', planSummaryTable(plan, compact));
  const blocked = blockedChanges(plan).length;
  parts.push(
    plan.operations.length
      ? `**Plan:** ${s.create} to create, ${s.update} to update, ${s.replace} to replace, ${s.rotate} to rotate, ${s.delete} to delete.`
      : blocked
        ? `**No changes can be made**, but ${blocked} resource(s) differ from the configuration: another configuration owns them.`
        : security.length
          ? '**No resource changes**; only the security changes above.'
          : '**No changes.** The live service matches the configuration.',
  );
  if (plan.warnings.length) {
    parts.push(
      [
        '**Warnings**',
        '',
        ...capList(
          plan.warnings.map((w) => `- ${escapeText(short(w))}`),
          '- ',
          10,
        ),
      ].join('\n'),
    );
  }
  return redactReport(parts.join('\n\n'));
}

export function renderPlanMarkdown(plan: Plan, o: MarkdownOptions = {}): string {
  const max = o.maxChars ?? GITHUB_COMMENT_LIMIT;
  const blocks: Block[] = plan.operations.map((op) => ({ ...opBlock(op), group: '#### Changes' }));
  // Drift found while planning that the operations do not already show.
  if (o.drift) {
    const extra = o.drift.items
      .filter((i) => i.category === 'unmanaged' || i.category === 'secret_missing' || i.category === 'expiring')
      .filter((i) => i.action === null || i.action === 'rotate');
    blocks.push(...driftBlocks(extra, '#### Drift and findings'));
  }
  const tail = redactReport(`<sub>kms-sync plan · ${escapeText(plan.generatedAt)}</sub>`);
  for (const b of blocks) b.text = redactReport(b.text);
  let head = planHead(plan, o, false);
  if (head.length + tail.length + 600 > max) head = planHead(plan, o, true);
  return assemble(head, blocks, tail, max, 'resource(s)', o.fullCommand ?? 'kms-sync plan');
}

// ------------------------------------------------------------------ drift

function driftItemBlock(i: DriftItem): string {
  const usage = describeUsage(i.usage);
  const planned = i.action ? ` · apply would ${i.action} it` : '';
  const summary = `<code>${DRIFT_SYMBOL[i.category]}</code> ${code(i.address)}: ${escapeText(i.detail)}${planned}`;
  return details(summary, [
    fieldTable(
      ['Field', 'Live', 'Desired'],
      withoutMarkerFields(i.fields).map((f) => [code(f.path), code(json(f.before)), code(json(f.after))]),
    ),
    i.ignoredFields.length ? `Ignored fields: ${i.ignoredFields.map((f) => code(f.path)).join(', ')}` : '',
    usage ? `**Usage:** ${escapeText(usage)}` : '',
  ]);
}

function driftBlocks(items: DriftItem[], sectionHeading: string): Block[] {
  const blocks: Block[] = [];
  for (const cat of DRIFT_CATEGORIES) {
    const list = items.filter((i) => i.category === cat);
    if (!list.length) continue;
    // The section heading rides with the first category's heading.
    const group = `${blocks.length === 0 ? `${sectionHeading}\n\n` : ''}##### ${CATEGORY_TITLE[cat]} (${list.length})`;
    for (const i of list) blocks.push({ group, text: driftItemBlock(i) });
  }
  return blocks;
}

function driftSummaryTable(report: DriftReport, compact: boolean): string {
  const line = (name: string, c: DriftReport['summary']['byEnv'][string]) =>
    `| ${name} | ${c.changed_outside} | ${c.pending} | ${c.missing} | ${c.unmanaged} | ${c.secret_missing} | ${c.expiring} | ${c.total} |`;
  const envs = Object.entries(report.summary.byEnv).sort(([a], [b]) => (a < b ? -1 : 1));
  return [
    '| Environment | Changed outside | Pending | Missing | Unmanaged | Secret missing | Expiring | Total |',
    '|---|--:|--:|--:|--:|--:|--:|--:|',
    ...(compact ? [] : envs.map(([env, c]) => line(code(env), c))),
    line(compact ? `**Total** (${envs.length} environments; rows omitted to fit)` : '**Total**', report.summary),
  ].join('\n');
}

function driftHead(report: DriftReport, o: MarkdownOptions, compact: boolean): string {
  const s = report.summary;
  const parts: string[] = [];
  if (o.marker) parts.push(o.marker);
  parts.push('### kms-sync drift', targetLine(report.target));
  const live = liveBanner(report.target);
  if (live.length) parts.push(live.join('\n'));
  const risky = report.items
    .filter((i) => i.action === 'delete' || i.action === 'replace' || i.action === 'rotate')
    .filter((i, n, all) => all.findIndex((x) => x.address === i.address) === n);
  if (risky.length) {
    parts.push(
      [
        '> [!WARNING]',
        `> **Applying the desired state would delete, replace or rotate ${risky.length} resource(s):**`,
        ...capList(
          risky.map((i) => `> - ${i.action} ${code(i.address)}: ${escapeText(short(i.detail, 200))}`),
          '> - ',
        ),
      ].join('\n'),
    );
  }
  parts.push('#### Summary', driftSummaryTable(report, compact));
  parts.push(
    s.total
      ? `**Drift:** ${s.total} found: ${s.changed_outside} changed outside, ${s.pending} pending, ${s.missing} missing, ${s.unmanaged} unmanaged, ${s.secret_missing} secret missing, ${s.expiring} expiring.`
      : '**No drift.** The live service matches the desired state.',
  );
  if (s.ignored || s.ignoredFields) {
    parts.push(
      `_Ignored by ${code(report.ignore.source ?? '.kmsignore')}: ${s.ignored} item(s) and ${s.ignoredFields} field(s) of reported items._`,
    );
  }
  if (report.warnings.length) {
    parts.push(
      [
        '**Warnings**',
        '',
        ...capList(
          report.warnings.map((w) => `- ${escapeText(short(w))}`),
          '- ',
          10,
        ),
      ].join('\n'),
    );
  }
  return redactReport(parts.join('\n\n'));
}

export function renderDriftMarkdown(report: DriftReport, o: MarkdownOptions = {}): string {
  const max = o.maxChars ?? GITHUB_COMMENT_LIMIT;
  const blocks = driftBlocks(report.items, '#### Drift');
  for (const b of blocks) b.text = redactReport(b.text);
  const notes: string[] = [];
  for (const w of report.usageWindows ?? []) {
    notes.push(
      `usage of ${code(w.projectEnv)} from ${w.complete ? 'all' : `the ${w.logsSampled} most recent`} log(s)${w.oldest ? ` since ${escapeText(w.oldest)}` : ''}`,
    );
  }
  const tail = redactReport(
    `<sub>kms-sync drift · ${escapeText(report.generatedAt)}${notes.length ? ` · ${notes.join('; ')}` : ''}</sub>`,
  );
  let head = driftHead(report, o, false);
  if (head.length + tail.length + 600 > max) head = driftHead(report, o, true);
  return assemble(head, blocks, tail, max, 'item(s)', o.fullCommand ?? 'kms-sync drift');
}
