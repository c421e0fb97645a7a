// A time limit for everything one operation asks of the service (a Terraform resource's
// `timeouts` block): the requests started inside `withDeadline` see it, however deep the call
// chain, without a parameter threaded through every handler. The transport starts no attempt and
// no retry past it, and gives each attempt at most the time left.
import { AsyncLocalStorage } from 'node:async_hooks';

interface Deadline {
  /** Epoch ms. */
  at: number;
  /** What the limit is for, in the error: e.g. `kms_client create (timeouts.create = "30s")`. */
  what: string;
}

const current = new AsyncLocalStorage<Deadline>();

/** The operation ran out of its time limit before (or while) asking the service. */
export class DeadlineExceededError extends Error {
  constructor(what: string, request: string) {
    super(`${what} ran out of time: ${request} was not sent (the time limit passed)`);
  }
}

/** Runs `fn` with a limit of `ms` on every request it makes; no limit when `ms` is undefined. */
export function withDeadline<T>(ms: number | undefined, what: string, fn: () => Promise<T>): Promise<T> {
  if (ms === undefined) return fn();
  const outer = current.getStore();
  const at = Date.now() + ms;
  // A nested limit never extends an outer one.
  return current.run(outer && outer.at < at ? outer : { at, what }, fn);
}

/** Milliseconds left under the current limit (undefined: none), and what it is for. */
export function deadlineLeft(): { ms: number; what: string } | undefined {
  const d = current.getStore();
  return d ? { ms: d.at - Date.now(), what: d.what } : undefined;
}
