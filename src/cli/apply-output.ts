// How apply and rotate report their run: for people (plan text, a progress line, a summary) or, with
// --json, a JSON-lines event stream on stdout (schemas/kms-sync-apply-events.schema.json), one
// object per line like Terraform's -json: planned changes, each operation's start and end, each key
// stored (address, store, secret name: never a value), recoveries, and a closing summary. In JSON
// mode nothing else is written to stdout; prompts, retries and notices go to stderr.
import type { ApplyEvent, ApplyResult } from '../apply/execute.js';
import type { StoredKeyReceipt } from '../apply/key-capture.js';
import { cut, escapeUnsafe, printable as p } from '../model/printable.js';
import { blockedChanges, operationHeader, type Operation, type Plan } from '../plan/types.js';
import { colorEnabled, renderHeader, renderOperationsText, renderPlanText, securityLines } from '../report/index.js';
import { interactiveStderr } from './read-progress.js';
import type { CommitRequired } from './ci-guard.js';
import { alive, err, isCi, out, outLast, workflowCommand } from './output.js';

export const APPLY_EVENTS_FORMAT = '1.0';

/** `refused`: the run stopped before anything was written (a store check, failed first writes): exit 1. */
export type ApplyOutcome =
  | 'complete'
  | 'partial'
  | 'interrupted'
  | 'refused'
  | 'cancelled'
  | 'nothing_to_do'
  | 'blocked';

/** Failures with the same error (and the same certainty), in the order they were first seen. */
export interface FailureGroup {
  error: string;
  unknown: boolean;
  addresses: (string | null)[];
}

export function groupFailures(failed: ApplyResult['failed']): FailureGroup[] {
  const groups = new Map<string, FailureGroup>();
  for (const f of failed) {
    const k = `${f.unknown ? 1 : 0}\u0000${f.error}`;
    const g = groups.get(k) ?? { error: f.error, unknown: Boolean(f.unknown), addresses: [] };
    g.addresses.push(f.op?.address ?? null);
    groups.set(k, g);
  }
  return [...groups.values()];
}

/** Addresses shown in a grouped failure line before the rest are counted. */
const GROUP_ADDRESSES = 3;
/** Identical failures printed one by one as they happen before the rest go to the summary's count. */
const REPEATS_SHOWN = 3;

export interface ApplyReporter {
  readonly json: boolean;
  /** The plan about to be confirmed or applied. */
  plan(plan: Plan, note?: string): void;
  /**
   * Operations of a plan too large to hold whole, listed part by part as it is made (before
   * `plan`, which then gets the whole's warnings and totals without its operations).
   */
  planned(ops: readonly Operation[]): void;
  /** A line for people (text mode: stdout; JSON mode: stderr). */
  say(text: string): void;
  onEvent(e: ApplyEvent): void;
  inFlight(): number;
  /**
   * The run ended: summary, exit code; then, loudly and last, the files a CI run must commit and
   * push (an opted-in run that wrote keys into a local store file: ci-guard.ts).
   */
  finish(result: ApplyResult | undefined, outcome: ApplyOutcome, exitCode: number, commit?: CommitRequired): void;
  /** A second interrupt ends the run now: what was done so far, from the events seen. */
  cutShort(): void;
}

const now = () => new Date().toISOString();
const opRef = (op: Operation) => ({
  address: op.address,
  kind: op.kind,
  action: op.action,
  reason: op.actionReason,
  ...(op.projectEnv ? { environment: op.projectEnv } : {}),
});

function countActions(ops: readonly Operation[]) {
  const c = (a: string) => ops.filter((o) => o.action === a).length;
  return { create: c('create'), update: c('update'), replace: c('replace'), rotate: c('rotate'), delete: c('delete') };
}

const counts = (r: ApplyResult | undefined) => countActions(r?.done ?? []);

const describeCounts = (c: ReturnType<typeof countActions>) =>
  `${c.create} created, ${c.update} updated, ${c.replace} replaced, ${c.rotate} rotated, ${c.delete} destroyed`;

const commandVerb = (command: string) =>
  command === 'destroy' ? 'Destroy' : command === 'rotate' ? 'Rotate' : 'Apply';

export function jsonReporter(
  command: 'apply' | 'rotate' | 'destroy',
  write: (line: string) => void = out,
): ApplyReporter {
  let ended = 0;
  // The engine reports the start of some operations only implicitly (those done together with
  // their parent): every operation still gets its apply_start before its end.
  const started = new Set<string>();
  const start = (op: Operation) => {
    if (started.has(op.address)) return;
    started.add(op.address);
    emit('apply_start', `${op.address}: ${op.action} started`, { change: opRef(op) });
  };
  const emit = (type: string, message: string, extra: Record<string, unknown> = {}) =>
    write(`${JSON.stringify({ type, timestamp: now(), message, ...extra })}\n`);
  emit('version', `kms-sync ${command}`, { command, format_version: APPLY_EVENTS_FORMAT, kms_sync: '0.1.0' });
  const done: Operation[] = [];
  let keysStored = 0;
  const planned = (ops: readonly Operation[]) => {
    for (const op of ops) emit('planned_change', `${op.address}: plan to ${op.action}`, { change: opRef(op) });
  };
  return {
    json: true,
    planned,
    plan(plan) {
      planned(plan.operations);
      const s = plan.summary;
      // From the summary: a plan applied environment by environment keeps its counts, not its operations.
      const total = s.create + s.update + s.replace + s.rotate + s.delete;
      emit('change_summary', `Plan: ${total} operation(s)`, {
        changes: {
          total,
          create: s.create,
          update: s.update,
          replace: s.replace,
          rotate: s.rotate,
          delete: s.delete,
        },
        target: { url: plan.target.url, credential: plan.target.credential, environments: plan.target.envs },
      });
      for (const w of plan.warnings) emit('diagnostic', w, { severity: 'warning' });
    },
    say: (text) => err(text.endsWith('\n') ? text : `${text}\n`),
    onEvent(e) {
      if (e.type === 'start') {
        start(e.op);
      } else if (e.type === 'done') {
        start(e.op);
        ended++;
        done.push(operationHeader(e.op));
        emit('apply_complete', `${e.op.address}: ${e.op.action} complete`, {
          change: opRef(e.op),
          ...(e.note ? { note: e.note } : {}),
        });
      } else if (e.type === 'failed') {
        start(e.op);
        ended++;
        emit('apply_errored', `${e.op.address}: ${e.op.action} failed: ${e.error}`, {
          change: opRef(e.op),
          error: e.error,
        });
      } else if (e.type === 'key-stored') {
        keysStored++;
        emit('key_stored', `${e.receipt.address} stored in ${e.receipt.store} as ${e.receipt.secret}`, {
          key: { address: e.receipt.address, store: e.receipt.store, secret: e.receipt.secret },
        });
      } else if (e.type === 'recovered') {
        emit('recovery', e.note, { change: opRef(e.op), note: e.note });
      }
    },
    inFlight: () => started.size - ended,
    cutShort() {
      const tally = countActions(done);
      emit('apply_summary', `Apply cut short by a second interrupt`, {
        outcome: 'interrupted',
        exit_code: 3,
        changes: tally,
        keys_stored: keysStored,
        failed: [],
        failed_groups: [],
        not_attempted: [],
        recoveries: [],
        stop_reason: `a second interrupt: ${started.size - ended} operation(s) in flight were cut off (the next run re-reads them)`,
      });
      if (!alive('stdout'))
        err(
          `${commandVerb(command)} cut short by a second interrupt: ${describeCounts(tally)}; ${keysStored} key(s) stored. Run kms-sync ${command} again to converge.\n`,
        );
    },
    finish(r, outcome, exitCode, commit) {
      // The people's version on stderr first, so the summary stays the stream's last line.
      if (commit) err(banner(commit));
      // stdout's reader is gone (`--json | head`): the outcome, for people, on stderr.
      if (!alive('stdout'))
        err(
          `${commandVerb(command)} ${outcome.replace(/_/g, ' ')}: exit ${exitCode}; ${describeCounts(counts(r))}; ${r?.keysStored.length ?? 0} key(s) stored.\n`,
        );
      emit('apply_summary', `Apply ${outcome.replace(/_/g, ' ')}`, {
        outcome,
        exit_code: exitCode,
        changes: counts(r),
        keys_stored: r?.keysStored.length ?? 0,
        failed: (r?.failed ?? []).map((f) => ({ address: f.op?.address ?? null, error: f.error })),
        // The same failures, one entry per distinct error with its count (4,500 identical refusals: one entry).
        failed_groups: groupFailures(r?.failed ?? []).map((g) => ({
          error: g.error,
          count: g.addresses.length,
          ...(g.unknown ? { outcome_unknown: true } : {}),
          addresses: g.addresses.slice(0, 10),
        })),
        not_attempted: (r?.notAttempted ?? []).map((o) => o.address),
        recoveries: r?.recoveries ?? [],
        ...(r?.stopReason ? { stop_reason: r.stopReason } : {}),
        ...(commit
          ? {
              commit_required: {
                files: commit.files,
                ...(commit.journal ? { journal: commit.journal } : {}),
                message: commit.lines.join(' '),
              },
            }
          : {}),
      });
    },
  };
}

/**
 * The commit-and-push lines, set apart so a job log shows them; in GitHub Actions also as warning
 * annotations (on stderr), which the run's summary page shows.
 */
function banner(commit: CommitRequired, env: NodeJS.ProcessEnv = process.env): string {
  if (env.GITHUB_ACTIONS === 'true') {
    for (const l of commit.lines) workflowCommand('warning', l, { title: 'kms-sync: commit and push' });
  }
  const rule = '!'.repeat(72);
  return `\n${rule}\n${commit.lines.map((l) => `!! ${l}`).join('\n')}\n${rule}\n`;
}

function summaryText(r: ApplyResult, compact = false): string {
  const lines = [`Resources: ${describeCounts(counts(r))}.`];
  if (r.keysStored.length && compact) {
    const stores = [...new Set(r.keysStored.map((k) => k.store))];
    lines.push(
      `Keys issued and stored: ${r.keysStored.length}, in ${stores.join(', ')} (kms-sync secrets list shows them).`,
    );
  } else if (r.keysStored.length) {
    lines.push(`Keys issued and stored (${r.keysStored.length}):`);
    // By address: keys are stored as their writes finish, which concurrent writes make an order of chance.
    const byAddress = [...r.keysStored].sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : 0));
    for (const k of byAddress) lines.push(`  ${p(k.address)} → ${p(k.store)} (${p(k.secret)})`);
  }
  for (const n of r.recoveries) lines.push(`Recovered: ${n}`);
  return lines.join('\n') + '\n';
}

function destroySummary(r: ApplyResult): string {
  return `Resources: ${counts(r).delete} destroyed.\n${r.recoveries.map((n) => `Recovered: ${n}\n`).join('')}`;
}

/** Not-attempted operations listed one a line up to this many (then counted). */
const UNRESOLVED_LINES = 100;

/**
 * What a run that stopped part-way leaves unresolved, one line per item: its address and why
 * (failed, with the error; outcome unknown, re-read by the next run; not attempted).
 */
export function unresolvedText(r: ApplyResult, compact = false, refused = false): string {
  const lines: string[] = [];
  const total = r.failed.length + r.notAttempted.length;
  if (total === 0) return '';
  lines.push(refused ? 'Not done:' : `Unresolved (${total}):`);
  // Identical failures are one line with their count and the first few addresses.
  for (const g of groupFailures(r.failed)) {
    const why = g.unknown
      ? `outcome unknown: ${cut(p(g.error), 400)} (the next run re-reads it)`
      : `failed: ${cut(p(g.error), 400)}`;
    const names = g.addresses.slice(0, GROUP_ADDRESSES).map((a) => (a === null ? '(before any operation)' : p(a)));
    if (g.addresses.length === 1) lines.push(`  ${names[0]}: ${why}`);
    else
      lines.push(
        `  ${g.addresses.length} operation(s) ${why} (${names.join(', ')}${g.addresses.length > GROUP_ADDRESSES ? ` and ${g.addresses.length - GROUP_ADDRESSES} more` : ''})`,
      );
  }
  const why = r.interrupted
    ? 'not attempted: the run was interrupted'
    : r.failed.length
      ? 'not attempted: an earlier step failed'
      : 'not attempted: the run stopped before it (see the reason above)';
  // A refused run wrote nothing: what it did not attempt is everything, counted on one line.
  const limit = compact || refused ? 0 : UNRESOLVED_LINES;
  for (const o of r.notAttempted.slice(0, limit)) lines.push(`  ${p(o.address)}: ${why}`);
  if (r.notAttempted.length > limit)
    lines.push(
      `  ${limit ? '… ' : ''}${r.notAttempted.length - limit}${limit ? ' more' : ''} operation(s) ${refused ? 'not attempted' : why}`,
    );
  return `${lines.join('\n')}\n`;
}

/**
 * The last advice of a run that stopped part-way: "run again" only when running again can help
 * (an interrupt, a transient failure, an unknown outcome); otherwise what is reported has to be
 * fixed first (a missing age identity, a store not writable, a refused request).
 */
export function adviceAfter(r: ApplyResult, command = 'apply'): string {
  const retryHelps =
    r.interrupted ||
    (r.failed.length > 0 ? r.failed.every((f) => f.transient) : !r.stopReason || /interrupted/.test(r.stopReason));
  return retryHelps
    ? `Run kms-sync ${command} again to converge: it re-reads the live state and continues from there.`
    : `Fix what is reported above first; then run kms-sync ${command} again, which re-reads the live state and continues from there.`;
}

/** "1m 05s" / "42s": elapsed time and ETA in the progress line. */
export function formatDuration(ms: number): string {
  const total = Math.max(0, Math.round(ms / 1000));
  const m = Math.floor(total / 60);
  const sec = total % 60;
  return m > 0 ? `${m}m ${String(sec).padStart(2, '0')}s` : `${sec}s`;
}

/**
 * On a terminal: one progress line with elapsed time and an estimate of what is left (from the
 * pace so far). Elsewhere (logs, CI): one line per finished operation, with a UTC timestamp when
 * CI is set, so slow steps show in the job log.
 */
export function textReporter(
  total: () => number,
  opts: { compact?: boolean; env?: NodeJS.ProcessEnv; clock?: () => number; command?: 'apply' | 'destroy' } = {},
): ApplyReporter {
  // Terraform's words: "Destroy complete! Resources: N destroyed." ends a destroy.
  const verb = opts.command === 'destroy' ? 'Destroy' : 'Apply';
  const env = opts.env ?? process.env;
  const clock = opts.clock ?? Date.now;
  const ci = isCi(env);
  const tty = interactiveStderr(env);
  // The clock starts with the first operation, not while the plan waits for its confirmation.
  let startedAt: number | undefined;
  let ticker: ReturnType<typeof setInterval> | undefined;
  const since = () => clock() - (startedAt ?? clock());
  let done = 0;
  let failed = 0;
  // What a second interrupt's summary reports (the run's own result never comes then).
  const finished: Operation[] = [];
  const stored: StoredKeyReceipt[] = [];
  const stopDrawing = () => {
    if (ticker) clearInterval(ticker);
    ticker = undefined;
    if (tty) err('\r\x1b[2K');
  };
  const repeats = new Map<string, number>();
  // Operations under way: some end without a start of their own (done with their parent), so
  // they are counted by identity, never as starts minus ends (which went negative).
  const active = new Set<Operation>();
  const stamp = () => (ci ? `[${new Date(clock()).toISOString()}] ` : '');
  const line = (s: string) => err(`${stamp()}${s}\n`);
  const draw = () => {
    const finished = done + failed;
    const elapsed = since();
    const eta =
      finished > 0 && finished < total()
        ? `, about ${formatDuration((elapsed / finished) * (total() - finished))} left`
        : '';
    err(
      `\r\x1b[2KApplying… ${finished}/${total()} done${failed ? `, ${failed} failed` : ''}, ${formatDuration(elapsed)} elapsed${eta}`,
    );
  };
  return {
    json: false,
    planned: (ops) => {
      if (!opts.compact && ops.length) out(renderOperationsText(ops, { color: colorEnabled(process.stdout) }));
    },
    plan: (plan, note) => {
      out(opts.compact ? renderPlanCompact(plan) : renderPlanText(plan, { color: colorEnabled(process.stdout) }));
      if (note) out(note);
    },
    say: (text) => out(text),
    inFlight: () => active.size,
    onEvent: (e) => {
      if (startedAt === undefined) {
        startedAt = clock();
        if (tty) {
          ticker = setInterval(draw, 1000);
          ticker.unref();
        }
      }
      if (e.type === 'start') active.add(e.op);
      else if (e.type === 'done') {
        active.delete(e.op);
        done++;
        finished.push(operationHeader(e.op));
        // A line per resource, also on a terminal (above the progress line): the run's record
        // stays in the scrollback once the progress line is gone. --compact keeps to the counter.
        if (tty) err('\r\x1b[2K');
        if (!(tty && opts.compact))
          line(`${p(e.op.address)}: ${e.op.action} complete${e.note ? ` (${p(e.note)})` : ''}`);
        if (tty) draw();
      } else if (e.type === 'key-stored') {
        stored.push(e.receipt);
      } else if (e.type === 'failed') {
        active.delete(e.op);
        failed++;
        if (tty) err('\r\x1b[2K');
        const seen = (repeats.get(e.error) ?? 0) + 1;
        repeats.set(e.error, seen);
        if (seen <= REPEATS_SHOWN) line(`${p(e.op.address)}: ${e.op.action} FAILED: ${cut(p(e.error), 500)}`);
        if (seen === REPEATS_SHOWN)
          line('  (further failures with this same error are counted in the summary, not listed)');
        if (tty) draw();
      } else if (e.type === 'recovered') {
        if (tty) err('\r\x1b[2K');
        line(`recovered: ${p(e.note)}`);
      }
    },
    cutShort: () => {
      stopDrawing();
      const r: ApplyResult = {
        done: finished,
        failed: [],
        notAttempted: [],
        keysStored: stored,
        recoveries: [],
        interrupted: true,
      };
      outLast(
        `\n${verb} cut short by a second interrupt. ${verb === 'Destroy' ? destroySummary(r) : summaryText(r, opts.compact)}` +
          `${stored.length ? '' : 'No key was stored yet. '}${active.size} operation(s) in flight were cut off: the next run re-reads them. Keys received and not yet stored are in the journal: ` +
          `the next run, or kms-sync secrets flush, puts them in their store.\n${stamp()}Took ${formatDuration(since())}. Run kms-sync ${verb.toLowerCase()} again to converge.\n`,
      );
    },
    finish: (r, outcome, _code, commit) => {
      stopDrawing();
      if (!r) return;
      if (outcome === 'complete') {
        outLast(
          `\n${verb} complete! ${verb === 'Destroy' ? destroySummary(r) : summaryText(r, opts.compact)}${stamp()}Took ${formatDuration(since())}.\n`,
        );
        if (commit) outLast(banner(commit));
        return;
      }
      if (outcome === 'refused') {
        // Nothing was written: no "part-way", no resource counts, no line per resource not attempted.
        outLast(`\n${verb} ${r.failed.length ? 'failed' : 'refused'}: nothing was written.\n`);
        if (r.stopReason) outLast(`Reason: ${r.stopReason}\n`);
        outLast(unresolvedText(r, opts.compact, true));
        outLast(`${stamp()}Took ${formatDuration(since())}. ${adviceAfter(r, verb.toLowerCase())}\n`);
        return;
      }
      outLast(
        `\n${verb} ${r.interrupted ? 'interrupted.' : 'stopped part-way.'} ${verb === 'Destroy' ? destroySummary(r) : summaryText(r, opts.compact)}`,
      );
      if (r.stopReason) outLast(`Reason: ${r.stopReason}\n`);
      outLast(unresolvedText(r, opts.compact));
      outLast(`${stamp()}Took ${formatDuration(since())}. ${adviceAfter(r, verb.toLowerCase())}\n`);
      if (commit) outLast(banner(commit));
    },
  };
}

/**
 * `--compact`: the plan as counts (per action, per kind, per environment) instead of one block per
 * resource, for plans of thousands of operations. Protected refusals and warnings stay listed.
 */
/**
 * `counted`: the counts per "action kind" row and environment, for a plan applied environment by
 * environment, which keeps them instead of its operations (engine/stream-apply.ts FleetTally).
 */
export function renderPlanCompact(plan: Plan, counted?: ReadonlyMap<string, ReadonlyMap<string, number>>): string {
  const lines = [renderHeader(plan), '', ...securityLines(plan)];
  let table = counted;
  if (!table) {
    const t = new Map<string, Map<string, number>>();
    for (const op of plan.operations) {
      const row = `${op.action} ${op.kind}`;
      const byEnv = t.get(row) ?? new Map<string, number>();
      byEnv.set(op.projectEnv ?? op.project ?? '-', (byEnv.get(op.projectEnv ?? op.project ?? '-') ?? 0) + 1);
      t.set(row, byEnv);
    }
    table = t;
  }
  if (table.size === 0 && blockedChanges(plan).length === 0)
    return `${lines.join('\n')}No changes. The live service matches the configuration.\n`;
  lines.push('kms-sync will perform (counts; drop --compact for every resource):');
  for (const [row, byEnv] of [...table].sort(([a], [b]) => (a < b ? -1 : 1))) {
    const n = [...byEnv.values()].reduce((x, y) => x + y, 0);
    const envs = [...byEnv].sort(([a], [b]) => (a < b ? -1 : 1)).map(([e, c]) => `${e} ${c}`);
    lines.push(
      `  ${String(n).padStart(6)}  ${row.padEnd(18)}  ${envs.length > 6 ? `${envs.slice(0, 6).join(', ')}, … (${envs.length} environments)` : envs.join(', ')}`,
    );
  }
  const s = plan.summary;
  lines.push(
    '',
    `Plan: ${s.create} to create, ${s.update} to update, ${s.replace} to replace, ${s.rotate} to rotate, ${s.delete} to delete.`,
  );
  for (const w of plan.warnings) lines.push(`Warning: ${w.split('\n').map(escapeUnsafe).join('\n')}`);
  return `${lines.join('\n')}\n`;
}
