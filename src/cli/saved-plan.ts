// The saved plan file (`plan --out`, `apply FILE`, `show FILE`). Format 2 spells every field name in
// snake_case like `plan --json` and the drift JSON; format 1 (camelCase, written by earlier builds) is still read.
// Only field names kms-sync chooses are converted: values that carry configuration or service data
// (before/after, field changes, store declarations, settings, fingerprints keyed by address) are
// kept as they are.
import type { DesiredState } from '../model/index.js';
import type { Plan } from '../plan/types.js';
import { UsageError } from './errors.js';

export const SAVED_PLAN_KIND = 'kms-sync/saved-plan';
export const SAVED_PLAN_FORMAT = 2;

export interface SavedPlan {
  kind: typeof SAVED_PLAN_KIND;
  /** Absolute configuration folder where the plan was made (used only when configDir is not found). */
  baseDir: string;
  /**
   * The configuration folder relative to the working directory of `plan`: `apply` resolves it
   * against its own working directory, so a plan made in one CI workspace path applies in another.
   */
  configDir?: string;
  /** Local store files (relative to the configuration folder) and whether each existed at plan time. */
  localStores?: { file: string; existed: boolean }[];
  /** The configuration's `settings:` the apply needs (allowLocalStoreInCi: ci-guard.ts). */
  settings?: DesiredState['settings'];
  files: string[];
  plan: Plan;
}

/** Subtrees that hold data, not field names of the format. */
const DATA = new Set(['before', 'after', 'changes', 'fingerprints', 'stores', 'settings']);

const toSnake = (k: string) => k.replace(/[A-Z]/g, (c) => `_${c.toLowerCase()}`);
const toCamel = (k: string) => k.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase());

function renameKeys(v: unknown, rename: (k: string) => string): unknown {
  if (Array.isArray(v)) return v.map((x) => renameKeys(x, rename));
  if (v === null || typeof v !== 'object') return v;
  return Object.fromEntries(
    Object.entries(v).map(([k, x]) => [rename(k), DATA.has(k) || DATA.has(rename(k)) ? x : renameKeys(x, rename)]),
  );
}

/** The file's JSON (format 2). */
export function savedPlanToFile(saved: SavedPlan): Record<string, unknown> {
  const { kind, ...rest } = saved;
  return { kind, format_version: SAVED_PLAN_FORMAT, ...(renameKeys(rest, toSnake) as Record<string, unknown>) };
}

/** A parsed saved plan file of format 2 or 1; `file` names it in errors. */
export function savedPlanFromFile(parsed: unknown, file: string): SavedPlan {
  const o = parsed as Record<string, unknown> | null;
  const refuse = () =>
    new UsageError(
      `${file}: not a kms-sync saved plan (expected kind ${SAVED_PLAN_KIND}, format ${SAVED_PLAN_FORMAT} or 1); create one with kms-sync plan --out FILE`,
    );
  if (o?.kind !== SAVED_PLAN_KIND) throw refuse();
  if (o.format_version === SAVED_PLAN_FORMAT) {
    const { kind: _kind, format_version: _v, ...rest } = o;
    const saved: SavedPlan = { kind: SAVED_PLAN_KIND, ...(renameKeys(rest, toCamel) as Omit<SavedPlan, 'kind'>) };
    if (saved.plan?.formatVersion !== 1) throw refuse();
    return saved;
  }
  // Format 1: the file is the camelCase object itself.
  if (o.format_version !== undefined || (o.plan as { formatVersion?: unknown } | undefined)?.formatVersion !== 1) {
    if (typeof o.format_version === 'number' && o.format_version > SAVED_PLAN_FORMAT) {
      throw new UsageError(
        `${file} was saved by a newer kms-sync (saved-plan format ${o.format_version}); this one reads formats 1 and ${SAVED_PLAN_FORMAT}. Plan again with this version`,
      );
    }
    throw refuse();
  }
  return o as unknown as SavedPlan;
}
