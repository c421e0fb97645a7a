// Small request validator: precise messages with the field path, unknown fields rejected.
import { badRequest } from './errors.js';

export type FieldType = 'string' | 'integer' | 'boolean' | 'object' | 'array';

export interface FieldRule {
  type: FieldType;
  required?: boolean;
  nullable?: boolean;
  pattern?: RegExp;
  patternHint?: string;
  min?: number;
  max?: number;
  maxLength?: number;
  items?: FieldRule | { fields: Record<string, FieldRule> };
  fields?: Record<string, FieldRule>;
  /** For free-form objects: accept any keys. */
  open?: boolean;
}

function typeName(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

export function checkValue(value: unknown, rule: FieldRule, path: string): void {
  if (value === null) {
    if (rule.nullable) return;
    throw badRequest(`${path}: must be ${rule.type}, got null`);
  }
  const t = typeName(value);
  const ok = rule.type === 'integer' ? t === 'integer' : rule.type === 'object' ? t === 'object' : rule.type === t;
  if (!ok) throw badRequest(`${path}: must be ${rule.type}, got ${t}`);
  if (rule.type === 'string') {
    const s = value as string;
    if (rule.maxLength !== undefined && s.length > rule.maxLength)
      throw badRequest(`${path}: must be at most ${rule.maxLength} characters`);
    if (rule.min !== undefined && s.length < rule.min) throw badRequest(`${path}: must not be empty`);
    if (rule.pattern && !rule.pattern.test(s))
      throw badRequest(`${path}: ${JSON.stringify(s)} is not valid${rule.patternHint ? ` (${rule.patternHint})` : ''}`);
  }
  if (rule.type === 'integer') {
    const n = value as number;
    if (rule.min !== undefined && n < rule.min) throw badRequest(`${path}: must be >= ${rule.min}`);
    if (rule.max !== undefined && n > rule.max) throw badRequest(`${path}: must be <= ${rule.max}`);
  }
  if (rule.type === 'array') {
    const arr = value as unknown[];
    if (rule.min !== undefined && arr.length < rule.min)
      throw badRequest(`${path}: must have at least ${rule.min} item(s)`);
    if (rule.max !== undefined && arr.length > rule.max)
      throw badRequest(`${path}: must have at most ${rule.max} items`);
    if (rule.items) {
      const itemRule: FieldRule =
        'fields' in rule.items && !('type' in rule.items)
          ? { type: 'object', fields: rule.items.fields }
          : (rule.items as FieldRule);
      for (const [i, item] of arr.entries()) checkValue(item, itemRule, `${path}[${i}]`);
    }
  }
  if (rule.type === 'object' && rule.fields && !rule.open) checkObject(value, rule.fields, path);
}

/** Validates a body object against field rules; `path` is the prefix used in messages. */
export function checkObject(value: unknown, fields: Record<string, FieldRule>, path = 'body'): void {
  if (typeName(value) !== 'object') throw badRequest(`${path}: must be a JSON object, got ${typeName(value)}`);
  const obj = value as Record<string, unknown>;
  for (const key of Object.keys(obj)) {
    if (!(key in fields)) {
      throw badRequest(`${path}.${key}: unknown field (allowed: ${Object.keys(fields).join(', ')})`);
    }
  }
  for (const [key, rule] of Object.entries(fields)) {
    const v = obj[key];
    if (v === undefined) {
      if (rule.required) throw badRequest(`${path}.${key}: is required`);
      continue;
    }
    checkValue(v, rule, `${path}.${key}`);
  }
}

/** Largest accepted integer query value: beyond it a page number stops being exact (and JSON-safe). */
export const MAX_QUERY_INT = 2_147_483_647;

const quoted = (raw: string) => JSON.stringify(raw.length > 40 ? `${raw.slice(0, 40)}…` : raw);

/** Parses an optional positive-integer query parameter. */
export function queryInt(params: URLSearchParams, name: string, fallback: number, min = 1): number {
  const raw = params.get(name);
  if (raw === null || raw === '') return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > MAX_QUERY_INT) {
    throw badRequest(
      `query parameter '${name}' must be an integer from ${min} to ${MAX_QUERY_INT}, got ${quoted(raw)}`,
    );
  }
  return Number(raw);
}

export function queryBool(params: URLSearchParams, name: string): boolean {
  const raw = params.get(name);
  if (raw === null || raw === '' || raw === 'false' || raw === '0') return false;
  if (raw === 'true' || raw === '1') return true;
  throw badRequest(`query parameter '${name}' must be true or false, got ${quoted(raw)}`);
}

export const MAX_BODY_DEPTH = 32;

/**
 * Refuses JSON nested deeper than `max` levels (iteratively: the check itself cannot overflow).
 * Stored deeper, a value would make every later answer and save of the state overflow the stack.
 */
export function checkDepth(value: unknown, path = 'body', max = MAX_BODY_DEPTH): void {
  const stack: [unknown, number][] = [[value, 1]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (!v || typeof v !== 'object') continue;
    if (depth > max) throw badRequest(`${path}: nests deeper than ${max} levels`);
    for (const child of Array.isArray(v) ? v : Object.values(v))
      if (child && typeof child === 'object') stack.push([child, depth + 1]);
  }
}
