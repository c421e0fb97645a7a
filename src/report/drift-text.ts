// Terminal rendering of a drift report, grouped by category the way driftctl prints it.
import { CATEGORY_TITLE, DRIFT_CATEGORIES, type DriftItem, type DriftReport, type DriftUsage } from '../plan/drift.js';
import { escapeUnsafe, printable as p } from '../model/printable.js';
import type { Plan } from '../plan/types.js';
import { safeUrl } from './redact.js';
import { formatValue, renderHeader } from './text.js';
import { withoutMarkerFields } from './present.js';

export interface DriftTextOptions {
  color: boolean;
}

const ANSI = {
  reset: '\x1b[0m',
  bold: '\x1b[1m',
  dim: '\x1b[2m',
  red: '\x1b[31m',
  green: '\x1b[32m',
  yellow: '\x1b[33m',
  cyan: '\x1b[36m',
  magenta: '\x1b[35m',
};
type Style = keyof typeof ANSI;

const MARK: Record<DriftItem['category'], [string, Style]> = {
  changed_outside: ['~', 'yellow'],
  pending: ['>', 'cyan'],
  missing: ['+', 'green'],
  unmanaged: ['?', 'magenta'],
  secret_missing: ['!', 'red'],
  expiring: ['⏲', 'cyan'],
};

export function describeUsage(u: DriftUsage | undefined): string | null {
  if (!u) return null;
  const parts: string[] = [];
  if (u.endpointStats) {
    const s = u.endpointStats;
    parts.push(`${s.total} call(s) in total, ${s.error} error(s)${s.total ? ` (${pct(s.error / s.total)})` : ''}`);
  }
  if (u.recent) {
    const r = u.recent;
    parts.push(
      r.calls
        ? `${r.calls} call(s) in recent logs, ${r.errors} error(s) (${pct(r.errorRate ?? 0)})${r.lastSeen ? `, last ${r.lastSeen}` : ''}`
        : 'no calls in recent logs',
    );
  }
  return parts.length ? parts.join('; ') : null;
}

export const pct = (x: number) => `${Math.round(x * 1000) / 10}%`;

export function renderDriftText(report: DriftReport, opts: DriftTextOptions): string {
  const paint = (s: Style, t: string) => (opts.color ? `${ANSI[s]}${t}${ANSI.reset}` : t);
  // renderHeader reads only the target.
  const header = renderHeader(
    { target: { ...report.target, url: safeUrl(report.target.url) } } as Pick<Plan, 'target'> as Plan,
    paint,
  );
  const out: string[] = [header, ''];
  if (report.items.length === 0) {
    out.push(
      paint('green', 'No drift.') +
        ' The live service matches the desired state' +
        (report.summary.ignored ? ` (${report.summary.ignored} ignored item(s)).` : '.'),
    );
  }
  for (const cat of DRIFT_CATEGORIES) {
    const items = report.items.filter((i) => i.category === cat);
    if (!items.length) continue;
    out.push(paint('bold', `${CATEGORY_TITLE[cat]} (${items.length}):`));
    const [sym, style] = MARK[cat];
    for (const i of items) {
      out.push(`  ${paint(style, sym)} ${p(i.address)}${paint('dim', ` (${p(i.detail)})`)}`);
      const fields = withoutMarkerFields(i.fields);
      const w = Math.max(0, ...fields.map((f) => f.path.length));
      for (const f of fields)
        out.push(`      ${p(f.path).padEnd(w)}  live ${formatValue(f.before)}  →  desired ${formatValue(f.after)}`);
      if (i.ignoredFields.length)
        out.push(paint('dim', `      ignored: ${i.ignoredFields.map((f) => p(f.path)).join(', ')}`));
      const usage = describeUsage(i.usage);
      if (usage) out.push(paint('dim', `      usage: ${usage}`));
    }
    out.push('');
  }
  if (report.ignored.length) {
    out.push(paint('dim', `Ignored (${report.ignored.length}, by ${report.ignore.source ?? 'ignore rules'}):`));
    for (const i of report.ignored) out.push(paint('dim', `  - ${p(i.address)} [${i.category}] ← ${p(i.rule)}`));
    out.push('');
  }
  if (report.ignore.unused.length) {
    out.push(paint('dim', `Ignore rules that matched nothing: ${report.ignore.unused.map(p).join('; ')}`), '');
  }
  if (report.usageWindows?.length) {
    for (const w of report.usageWindows) {
      out.push(
        paint(
          'dim',
          `Usage sample ${w.projectEnv}: ${w.logsSampled} most recent log(s)${w.oldest ? ` since ${w.oldest}` : ''}${w.complete ? ' (all logs)' : ''}`,
        ),
      );
    }
    out.push('');
  }
  for (const w of report.warnings)
    out.push(`${paint('yellow', 'Warning:')} ${w.split('\n').map(escapeUnsafe).join('\n')}`);
  if (report.warnings.length) out.push('');
  const s = report.summary;
  out.push(
    `${paint('bold', 'Drift:')} ${s.total} found: ${s.changed_outside} changed outside, ${s.pending} pending, ${s.missing} missing, ${s.unmanaged} unmanaged, ` +
      `${s.secret_missing} secret missing, ${s.expiring} expiring; ${s.ignored} ignored.`,
  );
  return out.join('\n') + '\n';
}
