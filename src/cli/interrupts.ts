// Ctrl-C (SIGINT), a CI runner's cancel (SIGTERM) and an output whose reader went away (EPIPE:
// `kms-sync apply | tee apply.log` after Ctrl-C killed tee too; `| head`) are one thing to a run:
// an interrupt. Installed first thing (run.ts), so that it covers planning as well as applying:
// - while nothing is being written (reading, planning, the confirmation): the service's reads are
//   cut (registered transports stop), the command unwinds, the run lock is released, and the exit
//   code is 128 + the signal (130 SIGINT, 143 SIGTERM, 141 for a closed output, as for SIGPIPE);
// - during an apply (enterApply): no new request starts, the ones in flight finish and journal
//   their keys, then the run ends with exit 3 if it wrote anything (sync-commands.ts runApply);
// - a second signal exits at once (after the journal writes under way, during an apply, and a
//   summary of what was done so far).
// A closed output is never written again (output.ts) and never counts as the second interrupt;
// the closing lines that were meant for it go to stderr (outLast).
import { EXIT } from './exit-codes.js';
import { err, guardStreams } from './output.js';

export type InterruptCause =
  | { kind: 'signal'; signal: 'SIGINT' | 'SIGTERM' }
  | { kind: 'closed'; stream: 'stdout' | 'stderr'; code: string };

interface ApplyHooks {
  /** Operations under way now. */
  inFlight: () => number;
  /** Waits (briefly) for the journal writes under way. */
  drain: () => Promise<void>;
  /** After a second interrupt: what was done so far, before the exit (never a half-drawn line). */
  cutShort?: () => void;
}

const controller = new AbortController();
let cause: InterruptCause | undefined;
let signalsSeen = 0;
const stoppers = new Set<() => void>();
let applying: ApplyHooks | undefined;
/** An apply ran to its end: what comes after (the summary) says nothing of "nothing changed". */
let applied = false;
let installed = false;

/** Aborted by the first interrupt. */
export const interruptSignal: AbortSignal = controller.signal;

export const interruptCause = (): InterruptCause | undefined => cause;

/** 128 + the signal's number, the shell's convention (a closed output: SIGPIPE's 141). */
export function interruptExitCode(c: InterruptCause | undefined = cause): number {
  if (!c) return EXIT.error;
  if (c.kind === 'closed') return 141;
  return c.signal === 'SIGTERM' ? 143 : 130;
}

function describe(c: InterruptCause): string {
  return c.kind === 'signal' ? `Interrupt received (${c.signal})` : `Output closed (${c.stream}: ${c.code})`;
}

/**
 * Registers what stops the service reads of a command that has written nothing yet (a transport's
 * stop); returns the unregistration. A command with none registered keeps Node's default for a
 * signal (exit at once) and its output is merely dropped when the reader goes.
 */
export function onInterruptStop(stop: () => void): () => void {
  if (cause && !applying) stop();
  stoppers.add(stop);
  return () => stoppers.delete(stop);
}

/** An apply is under way until the returned function is called. */
export function enterApply(hooks: ApplyHooks): () => void {
  applying = hooks;
  return () => {
    if (applying !== hooks) return;
    applying = undefined;
    applied = true;
  };
}

/** A command that listens for signals itself (the agent, the emulator) keeps them, and a closed output is only muted for it. */
const commandHandlesSignals = () => process.listenerCount('SIGTERM') > 1 || process.listenerCount('SIGINT') > 1;

export function triggerInterrupt(c: InterruptCause): void {
  const signal = c.kind === 'signal';
  if (cause === undefined && commandHandlesSignals()) return;
  if (signal) signalsSeen++;
  if (cause === undefined) {
    // Nothing to wind down (no service connection, no apply): a signal exits at once, as by
    // default, and a closed output is simply not written again.
    if (!applying && stoppers.size === 0) {
      if (signal) process.exit(interruptExitCode(c));
      return;
    }
    cause = c;
    if (applied) {
      // The apply is over and reported (or being reported): nothing to say, nothing to stop but reads.
    } else if (applying) {
      const n = Math.max(0, applying.inFlight());
      err(
        `\n${describe(c)}: finishing ${n} operation(s) in flight, starting no new one.${signal ? ' Interrupt again to exit at once.' : ''}\n`,
      );
    } else {
      err(
        `\n${describe(c)}: stopping; nothing was changed in the service.${signal ? ' Interrupt again to exit at once.' : ''}\n`,
      );
    }
    controller.abort();
    // Reads are cut only while nothing is written: an apply's requests in flight finish.
    if (!applying) for (const stop of stoppers) stop();
    return;
  }
  if (!signal) {
    // A signal came first (Ctrl-C on `apply | tee log` ends tee too): say where the rest goes.
    if (c.stream === 'stdout') err(`\n${describe(c)}: the rest of the output follows on stderr.\n`);
    return;
  }
  if (signalsSeen < 2) return;
  if (applying || applied) {
    err(
      '\nSecond interrupt: exiting now. Keys already received are journaled first; the next run recovers the rest.\n',
    );
    const hooks = applying;
    void (hooks?.drain() ?? Promise.resolve()).finally(() => {
      try {
        hooks?.cutShort?.();
      } finally {
        process.exit(EXIT.partial);
      }
    });
  } else {
    err('\nSecond interrupt: exiting now; nothing was changed in the service.\n');
    process.exit(interruptExitCode(c));
  }
}

/** First thing a command does: signals and closed outputs become interrupts. */
export function installInterrupts(): void {
  if (installed) return;
  installed = true;
  for (const name of ['SIGINT', 'SIGTERM'] as const) {
    for (const l of process.listeners(name)) if ((l as { kmsSyncEarly?: boolean }).kmsSyncEarly) process.off(name, l);
  }
  guardStreams((stream, code) => triggerInterrupt({ kind: 'closed', stream, code }));
  process.on('SIGINT', () => triggerInterrupt({ kind: 'signal', signal: 'SIGINT' }));
  process.on('SIGTERM', () => triggerInterrupt({ kind: 'signal', signal: 'SIGTERM' }));
}
