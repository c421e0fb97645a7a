// Terraform's `timeouts` block (create, read, update, delete) on every resource: a duration as
// Terraform writes them (Go's time.ParseDuration: "30s", "10m", "1h30m", "1.5h", "500ms"). The
// limit covers every request of the operation (api/deadline.ts): none starts past it, each gets
// at most the time left. What the operation did before the limit stays done.
import { DeadlineExceededError, withDeadline } from '../api/deadline.js';
import { DiagnosticError, type Diagnostics } from './diagnostics.js';
import { known } from './resources/types.js';
import type { TfObject } from './values/types.js';

export type TimeoutOperation = 'create' | 'read' | 'update' | 'delete';
const OPERATIONS: TimeoutOperation[] = ['create', 'read', 'update', 'delete'];
const UNIT_MS: Record<string, number> = { ns: 1e-6, us: 1e-3, µs: 1e-3, ms: 1, s: 1000, m: 60_000, h: 3_600_000 };

/** Milliseconds of a Go duration; throws on anything else (or a duration of 0 or less). */
export function parseDuration(text: string): number {
  const t = text.trim();
  if (!/^(\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)((\d+(\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h))*$/.test(t)) {
    throw new Error(
      `${JSON.stringify(text)} is not a duration: write a number and a unit (ms, s, m, h), e.g. "30s", "10m" or "1h30m"`,
    );
  }
  let ms = 0;
  for (const m of t.matchAll(/(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)/g)) ms += Number(m[1]) * UNIT_MS[m[2]!]!;
  if (!(ms >= 1)) throw new Error(`${JSON.stringify(text)} is shorter than a millisecond`);
  return Math.round(ms);
}

/** Configuration errors of a timeouts block, at the attribute. */
export function validateTimeouts(config: TfObject, d: Diagnostics): void {
  const block = config.timeouts;
  if (!block || typeof block !== 'object' || Array.isArray(block)) return;
  for (const op of OPERATIONS) {
    const v = (block as TfObject)[op];
    if (!known(v) || typeof v !== 'string') continue;
    try {
      parseDuration(v);
    } catch (e) {
      d.error('Invalid timeout', (e as Error).message, ['timeouts', op]);
    }
  }
}

/**
 * Runs one operation of a resource under its configured limit (none configured: as is). A limit
 * that passes becomes a diagnostic naming the resource, the operation and the limit.
 */
export async function withTimeout<T>(
  type: string,
  op: TimeoutOperation,
  obj: TfObject | null,
  fn: () => Promise<T>,
): Promise<T> {
  const block = obj?.timeouts;
  const text = block && typeof block === 'object' && !Array.isArray(block) ? (block as TfObject)[op] : undefined;
  if (typeof text !== 'string') return fn();
  const ms = parseDuration(text);
  try {
    return await withDeadline(ms, `${type} ${op} (timeouts.${op} = "${text}")`, fn);
  } catch (e) {
    if (!(e instanceof DeadlineExceededError)) throw e;
    throw new DiagnosticError(
      'Timed out',
      `${e.message}. Raise timeouts.${op}, or run Terraform again: what this ${op} did before the limit stays done ` +
        '(a key already issued is in the journal and the store, and the next apply adopts or revokes it; nothing is issued twice).',
      ['timeouts', op],
    );
  }
}
