// Field-level comparison for the per-kind diffs (kinds/): comparison is on canonical forms
// (CIDR sets, sorted-key JSON, UTC timestamps), and an unchanged value costs as little as possible:
// the no-op plan of 100,000 clients runs these once per field.
import { deepEqualJson, type JsonObject, type JsonValue } from '../model/index.js';
import type { FieldChange } from './types.js';

/**
 * `deepEqualJson` with shortcuts for what a diff mostly compares (one value with itself, two
 * strings, two string lists), so an unchanged resource costs no canonical JSON text at all.
 * Anything else takes the canonical comparison, so the answer is always the same.
 */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (typeof a === 'string' && typeof b === 'string') return false;
  if (Array.isArray(a) && Array.isArray(b) && a.length === b.length) {
    let strings = true;
    for (let i = 0; i < a.length && strings; i++) {
      const x: unknown = a[i];
      const y: unknown = b[i];
      if (typeof x !== 'string' || typeof y !== 'string') strings = false;
      else if (x !== y) return false;
    }
    if (strings) return true;
  }
  // Two objects with the same keys and values (endpoint requests and responses, mostly `{}`):
  // equal without their canonical texts. Anything else is left to the canonical comparison.
  if (isPlainObject(a) && isPlainObject(b)) {
    const keys = Object.keys(a);
    if (keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && sameJson(a[k], b[k])))
      return true;
  }
  return deepEqualJson(a as JsonValue, b as JsonValue);
}

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Appends the change of one field to `out`, if it changed. */
export function addChange(out: FieldChange[], path: string, before: unknown, after: unknown): void {
  if (!sameJson(before, after)) out.push({ path, before: before ?? null, after: after ?? null });
}

export function change(path: string, before: unknown, after: unknown): FieldChange[] {
  const out: FieldChange[] = [];
  addChange(out, path, before, after);
  return out;
}

/**
 * Appends the field-level diff of two flat-ish objects (metadata.team, ...): the changed keys of
 * the union of both key sets, sorted, without building the union for an unchanged object.
 */
export function addObjectChanges(out: FieldChange[], prefix: string, before: JsonObject, after: JsonObject): void {
  // for-in, not Object.keys: no key array per object (JSON objects have no inherited keys).
  let changed: string[] | undefined;
  for (const k in before) if (!sameJson(before[k], after[k])) (changed ??= []).push(k);
  for (const k in after) {
    if (Object.hasOwn(before, k)) continue;
    if (!sameJson(before[k], after[k])) (changed ??= []).push(k);
  }
  if (changed)
    for (const k of changed.sort())
      out.push({ path: `${prefix}.${k}`, before: before[k] ?? null, after: after[k] ?? null });
}

export function objectChanges(prefix: string, before: JsonObject, after: JsonObject): FieldChange[] {
  const out: FieldChange[] = [];
  addObjectChanges(out, prefix, before, after);
  return out;
}

/** The fields whose desired value differs from the live one (in the records of a kind's applied digest). */
export function differingFields(
  desired: Record<string, JsonValue | undefined>,
  live: Record<string, JsonValue | undefined>,
): string[] {
  const out: string[] = [];
  for (const k in desired) if (desired[k] !== undefined && !deepEqualJson(desired[k], live[k] ?? null)) out.push(k);
  return out;
}
