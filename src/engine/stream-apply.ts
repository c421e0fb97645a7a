// Apply environment by environment (issue 37): a fleet whose plan is too large to hold whole is
// planned twice. The first pass keeps a compact summary of each part (counts, the addresses of its
// removals, the stores its keys go to, the digest of its operations): enough for the confirmation
// and the deletion guard to see the whole fleet. The second pass reads, plans and applies each part
// in turn, letting it go before the next: a part whose plan is not the one confirmed (the live
// state moved in between) is not applied, like a stale saved plan. Below the limit the first
// pass's plan is kept and applied whole, as before, with one read.
import { createHash } from 'node:crypto';
import type { ApplyResult } from '../apply/execute.js';
import { opStores } from '../apply/execute.js';
import { heldReason, tallyRemovals } from '../plan/deletion-guard.js';
import { operationHeader, summarize, type Operation, type Plan, type PlanSummary } from '../plan/types.js';
import type { PartVisitor, PlanPartSeen } from './run.js';
import { UsageError } from './errors.js';

/** Operations a plan keeps whole before apply goes environment by environment (KMS_SYNC_APPLY_HOLD_OPERATIONS). */
export const DEFAULT_HOLD_OPERATIONS = 20_000;

/** The limit from the environment (the operator's, never the configuration's). */
export function holdOperationsFrom(env: NodeJS.ProcessEnv): number {
  const v = env.KMS_SYNC_APPLY_HOLD_OPERATIONS?.trim();
  if (!v) return DEFAULT_HOLD_OPERATIONS;
  if (!/^\d+$/.test(v))
    throw new UsageError(
      `KMS_SYNC_APPLY_HOLD_OPERATIONS must be a whole number of operations (got ${JSON.stringify(v)})`,
    );
  return Number(v);
}

/** The key of a part: its environment, or '' for the projects' own operations. */
const keyOf = (projectEnv: string | undefined) => projectEnv ?? '';

/** What the first pass keeps of a part. */
interface PartSummary {
  operations: number;
  /** sha256 of its operations (without those applied with their project), computed when the parts are let go. */
  digest?: string;
}

/** The digest of a part's operations: equal when the second pass plans exactly what was confirmed. */
function digestOf(ops: readonly Operation[]): string {
  const h = createHash('sha256');
  for (const op of ops) h.update(JSON.stringify(op)).update('\n');
  return h.digest('hex');
}

/**
 * Of an environment's operations, its create and its templates' when its project is created: the
 * API makes a project with its environments and templates in one request, so they go with the
 * project, first (apply/execute.ts phase 1).
 */
function withProject(ops: readonly Operation[], created: ReadonlySet<string>): Set<Operation> {
  const env = ops.find((op) => op.kind === 'env' && op.action === 'create');
  if (env?.project === undefined || !created.has(env.project)) return new Set();
  return new Set(ops.filter((op) => op === env || (op.kind === 'template' && op.action === 'create')));
}

/** The operations of a part that are its own (not applied with their project). */
function ownOperations(ops: readonly Operation[], created: ReadonlySet<string>): Operation[] {
  const early = withProject(ops, created);
  return early.size ? ops.filter((op) => !early.has(op)) : [...ops];
}

/**
 * The first pass (a PartVisitor for planFor): the whole fleet's totals, the deletion guard's
 * count, the stores written; the parts' plans while their operations stay under `hold`.
 */
export class FleetTally implements PartVisitor {
  private readonly hold: number;
  private readonly pruneRemoved: boolean;
  private readonly onStreaming: ((parts: readonly PlanPartSeen[]) => void) | undefined;
  private readonly onPart: ((part: PlanPartSeen) => void) | undefined;
  /** The parts' plans while under the limit; undefined once let go (streaming). */
  private kept: PlanPartSeen[] | undefined = [];
  private held = 0;
  readonly summaries = new Map<string, PartSummary>();
  /** Counts per "action kind" row and environment (or project): the compact plan's table. */
  readonly table = new Map<string, Map<string, number>>();
  summary: Omit<PlanSummary, 'unmanaged'> = { create: 0, update: 0, delete: 0, replace: 0, rotate: 0 };
  /** Addresses of the removals (deletes of what left the configuration, or pruned), and of the protected clients' keys among them. */
  readonly removals: string[] = [];
  readonly ofProtected: string[] = [];
  /** Keys issued per store (undefined: the default store): the CI's local-store check. */
  readonly keysPerStore = new Map<string | undefined, number>();
  /** Projects the plan creates, and the environment and template creates that go with them. */
  readonly createdProjects = new Set<string>();
  readonly withProjects: Operation[] = [];

  constructor(o: {
    hold: number;
    pruneRemoved: boolean;
    /** The limit is passed: the parts so far, whose operations are let go after this. */
    onStreaming?: (parts: readonly PlanPartSeen[]) => void;
    /** A part seen once streaming (its operations are let go after this). */
    onPart?: (part: PlanPartSeen) => void;
  }) {
    this.hold = o.hold;
    this.pruneRemoved = o.pruneRemoved;
    this.onStreaming = o.onStreaming;
    this.onPart = o.onPart;
  }

  /** The parts' operations were let go: apply goes environment by environment. */
  get streaming(): boolean {
    return this.kept === undefined;
  }

  /** Operations of the whole plan (before the deletion guard). */
  get operations(): number {
    const s = this.summary;
    return s.create + s.update + s.delete + s.replace + s.rotate;
  }

  retain(): boolean {
    return this.kept !== undefined;
  }

  async visit(part: PlanPartSeen): Promise<void> {
    const ops = part.plan.operations;
    if (part.projectEnv === undefined)
      for (const op of ops) if (op.kind === 'project' && op.action === 'create') this.createdProjects.add(op.project!);
    for (const op of ops) {
      this.summary[op.action]++;
      const row = `${op.action} ${op.kind}`;
      const where = op.projectEnv ?? op.project ?? '-';
      const byEnv = this.table.get(row) ?? new Map<string, number>();
      byEnv.set(where, (byEnv.get(where) ?? 0) + 1);
      this.table.set(row, byEnv);
      for (const store of opStores(op)) this.keysPerStore.set(store, (this.keysPerStore.get(store) ?? 0) + 1);
    }
    for (const op of withProject(ops, this.createdProjects)) this.withProjects.push(op);
    const removals = tallyRemovals(part.plan, { pruneRemoved: this.pruneRemoved, live: part.live });
    // One at a time: a spread of 100,000 arguments can overflow the stack.
    for (const op of removals.deleting) this.removals.push(op.address);
    for (const op of removals.ofProtected) this.ofProtected.push(op.address);
    const summary: PartSummary = { operations: ops.length };
    this.summaries.set(keyOf(part.projectEnv), summary);
    if (this.kept) {
      // The live state is not kept: the guard's count is taken above.
      this.kept.push({ ...part, live: { ...part.live, clients: [], endpoints: [] } });
      this.held += ops.length;
      if (this.held <= this.hold) return;
      this.onStreaming?.(this.kept);
      for (const k of this.kept) this.summaries.get(keyOf(k.projectEnv))!.digest = this.digest(k);
      this.kept = undefined;
      return;
    }
    this.onPart?.(part);
    summary.digest = this.digest(part);
  }

  private digest(part: PlanPartSeen): string {
    return digestOf(ownOperations(part.plan.operations, this.createdProjects));
  }

  /** Why the deletion guard holds the fleet's removals (undefined: it does not). */
  heldReason(o: { maxDeletes: number; approved?: boolean }): string | undefined {
    return heldReason(this.removals.length, this.ofProtected, o);
  }
}

/** What the second pass found: parts not applied because their plan moved, and what was applied. */
export interface StreamedOutcome {
  result: ApplyResult;
  /** Parts whose plan is not the confirmed one: not applied (`(projects)` for the projects' own). */
  stale: { part: string; why: string }[];
  /** Environments not reached because the run stopped. */
  notReached: number;
}

class StopStreaming extends Error {}

/**
 * The second pass (a PartVisitor for planFor): each part planned again is checked against the
 * first pass's digest and applied through `applyStep` (one journaled apply: apply/journaled-run.ts)
 * before the next environment is read. The projects' own creates and renames go first, with the
 * environments and templates created with them; their deletes go last, once every environment is done.
 */
export class ApplyPass implements PartVisitor {
  readonly tail = false as const;
  private readonly tally: FleetTally;
  private readonly applyStep: (plan: Plan) => Promise<ApplyResult>;
  private readonly holdRemovals: boolean;
  private readonly seen = new Set<string>();
  private projectDeletes: Plan | undefined;
  readonly outcome: StreamedOutcome = {
    result: { done: [], failed: [], notAttempted: [], keysStored: [], recoveries: [] },
    stale: [],
    notReached: 0,
  };

  constructor(tally: FleetTally, o: { holdRemovals: boolean; applyStep: (plan: Plan) => Promise<ApplyResult> }) {
    this.tally = tally;
    this.applyStep = o.applyStep;
    this.holdRemovals = o.holdRemovals;
  }

  retain(): boolean {
    return false;
  }

  /** Runs planFor's second pass through `plan` (planFor with this visitor), then the projects' deletes. */
  async run(plan: () => Promise<unknown>, stopped: () => boolean): Promise<StreamedOutcome> {
    try {
      await plan();
    } catch (e) {
      if (!(e instanceof StopStreaming)) throw e;
    }
    const r = this.outcome.result;
    const clean = () => r.failed.length === 0 && !r.stopReason && this.outcome.stale.length === 0;
    for (const key of this.tally.summaries.keys()) {
      if (this.seen.has(key)) continue;
      if (clean()) this.outcome.stale.push({ part: key || '(projects)', why: 'it is no longer in the live state' });
      else this.outcome.notReached++;
    }
    if (this.projectDeletes && clean() && !stopped()) await this.step(this.projectDeletes);
    else if (this.projectDeletes) for (const op of this.projectDeletes.operations) r.notAttempted.push(op);
    if (!r.stopReason && this.outcome.stale.length) {
      r.stopReason = `${this.outcome.stale.length} part(s) of the plan changed between the plan and its apply and were not applied (${this.outcome.stale
        .slice(0, 5)
        .map((s) => `${s.part}: ${s.why}`)
        .join('; ')}${this.outcome.stale.length > 5 ? '; …' : ''}): run kms-sync apply again to plan them afresh`;
    }
    return this.outcome;
  }

  async visit(part: PlanPartSeen): Promise<void> {
    const key = keyOf(part.projectEnv);
    this.seen.add(key);
    const confirmed = this.tally.summaries.get(key);
    const ops = ownOperations(part.plan.operations, this.tally.createdProjects);
    if (!confirmed) {
      if (ops.length > 0)
        this.outcome.stale.push({ part: key, why: `it appeared since the plan (${ops.length} operation(s) now)` });
      return;
    }
    if (digestOf(ops) !== confirmed.digest) {
      this.outcome.stale.push({
        part: key || '(projects)',
        why: `the live state changed since the plan (${confirmed.operations} operation(s) confirmed, ${part.plan.operations.length} now)`,
      });
      // The environments depend on their projects: none is applied without the projects' part.
      if (part.projectEnv === undefined) throw new StopStreaming();
      return;
    }
    const held = this.holdRemovals ? new Set(tallyRemovals(part.plan, { pruneRemoved: true }).deleting) : new Set();
    let apply = ops.filter((op) => !held.has(op));
    if (part.projectEnv === undefined) {
      const deletes = apply.filter((op) => op.action === 'delete');
      if (deletes.length) this.projectDeletes = this.planOf(part.plan, deletes);
      apply = [...apply.filter((op) => op.action !== 'delete'), ...this.tally.withProjects];
    }
    if (apply.length === 0) return;
    await this.step(this.planOf(part.plan, apply));
    const r = this.outcome.result;
    if (r.failed.length > 0 || r.stopReason) throw new StopStreaming();
  }

  private planOf(plan: Plan, operations: Operation[]): Plan {
    return { ...plan, operations, unmanaged: [], summary: summarize(operations, []) };
  }

  private async step(plan: Plan): Promise<void> {
    const got = await this.applyStep(plan);
    // Of what is done, its headers: the parts' operations are let go with them.
    const r = this.outcome.result;
    for (const op of got.done) r.done.push(operationHeader(op));
    for (const f of got.failed) r.failed.push({ ...f, op: operationHeader(f.op) });
    for (const op of got.notAttempted) r.notAttempted.push(operationHeader(op));
    for (const k of got.keysStored) r.keysStored.push(k);
    for (const [address, id] of got.created ?? []) (r.created ??= new Map()).set(address, id);
    r.recoveries.push(...got.recoveries);
    if (got.stopReason && !r.stopReason) r.stopReason = got.stopReason;
    if (got.interrupted) r.interrupted = true;
  }
}
