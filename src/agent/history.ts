// The agent's reconcile history (issue 36): kept in the state folder (STATE/history.json), so it
// survives restarts; bounded (the newest HISTORY_MAX rows, each with at most ERRORS_KEPT errors);
// and folded as Flux's events and Argo CD's show "x N": a reconcile whose outcome is the same as
// the newest row's (same trigger, result, revision, counts, errors and note; one that healed never
// folds) counts up that row instead of adding one, so a quiet agent's history is not 50 copies of
// "nothing to apply". The history is a record, never what a reconcile depends on: a damaged or
// unreadable file is reported and history starts empty, and a write that fails (a full disk) is
// reported while the rows stay in memory.
import { readStateJson, writeStateJson } from '../engine/state-files.js';
import { redactCredentials } from '../model/redact.js';
import { HISTORY_MAX, type HistoryRow, type ReconcileRecord } from './status.js';

/** Errors kept per row (an invalid revision can have hundreds; the status of the last reconcile has them all). */
const ERRORS_KEPT = 20;

/** What makes two reconciles the same outcome (times and durations aside). */
function outcome(r: ReconcileRecord): string {
  return JSON.stringify([
    r.trigger,
    r.result,
    r.revision ?? null,
    r.subject ?? null,
    r.planned,
    r.applied,
    r.errors,
    r.note ?? null,
    r.syncWindowOverride ?? false,
    r.heals ?? [],
  ]);
}

/** A record as a row: errors bounded, credentials redacted (it is written to disk and shown). */
function rowOf(r: ReconcileRecord): HistoryRow {
  const errors =
    r.errors.length > ERRORS_KEPT
      ? [...r.errors.slice(0, ERRORS_KEPT), `… ${r.errors.length - ERRORS_KEPT} more errors`]
      : r.errors;
  const row: HistoryRow = { ...r, errors, count: 1, firstStartedAt: r.startedAt };
  return JSON.parse(redactCredentials(JSON.stringify(row))) as HistoryRow;
}

const isString = (v: unknown): v is string => typeof v === 'string';

function parseRows(v: unknown): HistoryRow[] | undefined {
  if (!Array.isArray(v)) return undefined;
  return v
    .filter(
      (e): e is HistoryRow =>
        typeof e === 'object' &&
        e !== null &&
        isString(e.startedAt) &&
        isString(e.finishedAt) &&
        isString(e.firstStartedAt) &&
        isString(e.trigger) &&
        isString(e.result) &&
        Number.isSafeInteger(e.count) &&
        e.count >= 1 &&
        typeof e.planned === 'number' &&
        typeof e.applied === 'number' &&
        typeof e.durationMs === 'number' &&
        Array.isArray(e.errors) &&
        e.errors.every(isString),
    )
    .slice(0, HISTORY_MAX);
}

export class ReconcileHistory {
  /** Newest first. */
  rows: HistoryRow[] = [];
  private readonly file: string | undefined;
  /** The last write failed (said once, until one succeeds again). */
  private failing = false;

  constructor(file?: string) {
    this.file = file;
  }

  async load(onDamaged?: (why: string) => void): Promise<void> {
    if (!this.file) return;
    this.rows = (await readStateJson(this.file, parseRows, onDamaged)) ?? [];
  }

  /**
   * Adds a finished reconcile (or counts up the newest row when it is the same outcome) and keeps
   * the history in its file; `warn` is told when the file cannot be written (the rows stay in memory).
   */
  async record(r: ReconcileRecord, warn: (line: string) => void): Promise<HistoryRow[]> {
    const row = rowOf(r);
    const newest = this.rows[0];
    const rows =
      newest && outcome(newest) === outcome(row)
        ? [{ ...row, count: newest.count + 1, firstStartedAt: newest.firstStartedAt }, ...this.rows.slice(1)]
        : [row, ...this.rows].slice(0, HISTORY_MAX);
    this.rows = rows;
    if (!this.file) return rows;
    try {
      await writeStateJson(this.file, rows);
      this.failing = false;
    } catch (e) {
      if (!this.failing)
        warn(
          `the reconcile history could not be kept (${(e as Error).message}); it is kept in memory and written again after the next reconcile`,
        );
      this.failing = true;
    }
    return rows;
  }
}
