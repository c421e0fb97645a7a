// Plans of parts of one configuration, joined into the plan of the whole: the engine plans a fleet
// environment by environment (engine/stream.ts), and `kms-sync report merge` joins the plans of its
// shards. The result is the plan a single run over the whole would have made, field for field:
// operations, unmanaged resources and findings in their sorted order, warnings in the order of
// their phase (WARNING_PHASE) then of the environment they are about, fingerprints kind by kind.
import { sortOperations } from './diff.js';
import { summarize, type Plan, type WarningOrder } from './types.js';

export interface PlanPart {
  plan: Plan;
  /** The place of each of `plan.warnings` in the whole's order (same length). */
  warningOrder: WarningOrder[];
}

const cmp = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** The items once each, in the order first met. */
function unique<T>(items: readonly T[]): T[] {
  const seen = new Set<string>();
  return items.filter((x) => {
    const k = JSON.stringify(x);
    if (seen.has(k)) return false;
    seen.add(k);
    return true;
  });
}

/** The environment (or project) a fingerprint's address is about, and its kind's rank in readLiveState's order. */
const FINGERPRINT_KINDS = ['project.', 'env.', 'template.', 'client.', 'endpoint.'];
function fingerprintPlace(addr: string): [number, string] {
  const rank = FINGERPRINT_KINDS.findIndex((k) => addr.startsWith(k));
  const rest = addr.slice(addr.indexOf('.') + 1);
  const slash = rest.indexOf('/');
  return [rank < 0 ? FINGERPRINT_KINDS.length : rank, slash < 0 ? rest.split('#')[0]! : rest.slice(0, slash)];
}

/** Phases whose warnings each part makes for the whole run (recovery, stores): said once. */
const RUN_WIDE = (phase: number) => phase >= 21;

/** Stable: keeps each part's own order within one (phase, environment). */
export function mergeWarnings(
  parts: readonly { warnings: readonly string[]; warningOrder: readonly WarningOrder[] }[],
): { warnings: string[]; warningOrder: WarningOrder[] } {
  const all: { w: string; o: WarningOrder; i: number }[] = [];
  const said = new Set<string>();
  for (const p of parts) {
    p.warnings.forEach((w, j) => {
      const o = p.warningOrder[j] ?? [WARNING_PHASE_LAST, ''];
      if (RUN_WIDE(o[0])) {
        if (said.has(w)) return;
        said.add(w);
      }
      all.push({ w, o, i: all.length });
    });
  }
  all.sort((a, b) => a.o[0] - b.o[0] || cmp(a.o[1], b.o[1]) || a.i - b.i);
  return { warnings: all.map((x) => x.w), warningOrder: all.map((x) => x.o) };
}
const WARNING_PHASE_LAST = 99;

/** Fingerprints in readLiveState's order: kind by kind, and environment by environment within a kind. */
export function mergeFingerprints(records: readonly Record<string, string>[]): Record<string, string> {
  const entries: { k: string; v: string; rank: number; key: string; i: number }[] = [];
  for (const r of records) {
    for (const [k, v] of Object.entries(r)) {
      const [rank, key] = fingerprintPlace(k);
      entries.push({ k, v, rank, key, i: entries.length });
    }
  }
  entries.sort((a, b) => a.rank - b.rank || cmp(a.key, b.key) || a.i - b.i);
  const out: Record<string, string> = {};
  for (const e of entries) out[e.k] = e.v;
  return out;
}

/**
 * The plan of the whole from the plans of its parts (same configuration, service and owner;
 * refused otherwise). `generatedAt` is the earliest part's.
 */
export function mergePlans(parts: readonly PlanPart[]): PlanPart {
  if (parts.length === 0) throw new Error('no plan to merge');
  const first = parts[0]!.plan;
  for (const { plan } of parts) {
    if (
      plan.target.url !== first.target.url ||
      plan.target.owner !== first.target.owner ||
      plan.target.credential !== first.target.credential
    ) {
      throw new Error(
        `the plans were made for different services or configurations (${first.target.url} owner ${first.target.owner}, ${plan.target.url} owner ${plan.target.owner})`,
      );
    }
    if (JSON.stringify(plan.options) !== JSON.stringify(first.options))
      throw new Error('the plans were made with different options (--prune, --take-ownership)');
  }
  const operations = sortOperations(parts.flatMap((p) => p.plan.operations));
  const unmanaged = parts.flatMap((p) => p.plan.unmanaged).sort((a, b) => cmp(a.address, b.address));
  const keyFindings = parts
    .flatMap((p) => p.plan.keyFindings)
    .sort((a, b) => (a.address < b.address ? -1 : a.address > b.address ? 1 : a.finding < b.finding ? -1 : 1));
  const { warnings, warningOrder } = mergeWarnings(
    parts.map((p) => ({ warnings: p.plan.warnings, warningOrder: p.warningOrder })),
  );
  const union = (xs: string[][]) => [...new Set(xs.flat())].sort(cmp);
  const plan: Plan = {
    formatVersion: 1,
    generatedAt: parts.map((p) => p.plan.generatedAt).sort(cmp)[0]!,
    target: {
      // The key order of engine/run.ts's target: saved plans write the object as it is.
      url: first.target.url,
      credential: first.target.credential,
      projects: union(parts.map((p) => p.plan.target.projects)),
      owner: first.target.owner,
      envs: union(parts.map((p) => p.plan.target.envs)),
    },
    options: first.options,
    operations,
    unmanaged,
    keyFindings,
    warnings,
    summary: summarize(operations, unmanaged),
    stores: first.stores,
    fingerprints: mergeFingerprints(parts.map((p) => p.plan.fingerprints)),
  };
  // Changes of the configuration as a whole (stores, owner, ${env:} reads): each shard sees them; said once.
  const security = unique(parts.flatMap((p) => p.plan.security ?? []));
  if (security.length) plan.security = security;
  if (first.trustBase) plan.trustBase = first.trustBase;
  const envReferences = [...new Set(parts.flatMap((p) => p.plan.envReferences ?? []))];
  if (envReferences.length) plan.envReferences = envReferences;
  return { plan, warningOrder };
}
