// Hooks for the crash campaign (test/crash/), inert unless their variables are set. In model/ so
// that every layer can mark its points (secrets/ marks the one inside a store's lock).
// - KMS_SYNC_TEST_PAUSE=after-journal:300,before-revoke:500 holds the process that long at each
//   named point, so that a SIGKILL can be aimed inside the window that follows it.
// - KMS_SYNC_TEST_TRACE=<file> appends one line per point reached (`<point> <pid>`), written
//   synchronously, so that the campaign can tell in which window a kill landed.
import { appendFileSync } from 'node:fs';

/** The points of the key pipeline, in the order a key passes them. */
export type PipelinePoint =
  | 'issue-sent' // the key-issuing request is on the wire: issued but not journaled
  | 'after-journal' // raw key journaled (fsync): journaled but not stored
  | 'store-locked' // a file store's lock is taken and its write is about to start (a kill here leaves the lock file)
  | 'after-store' // written to its store: stored but not cleared from the journal
  | 'cleared' // journal entry cleared
  | 'before-revoke' // a revoke is journaled and about to be sent
  | 'revoke-sent' // the revoke request is on the wire
  | 'config-load' // the agent is about to load a revision's configuration (a kill here stands for one by memory)
  | 'agent-planned' // the agent planned a revision and is about to apply it
  | 'revision-synced' // the agent is about to record a revision as synced (its file in the state folder)
  | 'inventory-write'; // an apply is done and its inventory's records are about to be written: applied, not recorded

const pauses = parsePauses(process.env.KMS_SYNC_TEST_PAUSE);
const traceFile = process.env.KMS_SYNC_TEST_TRACE;

function parsePauses(spec: string | undefined): Map<string, number> {
  const m = new Map<string, number>();
  for (const part of (spec ?? '').split(',')) {
    const [at, ms] = part.split(':');
    if (at && ms && /^\d+$/.test(ms)) m.set(at, Number(ms));
  }
  return m;
}

/** Marks that the pipeline reached `at` (trace), then pauses there when asked to. */
export async function testPoint(at: PipelinePoint): Promise<void> {
  if (traceFile) {
    try {
      appendFileSync(traceFile, `${at} ${process.pid}\n`);
    } catch {
      // the trace is a test aid; it never fails a run
    }
  }
  const ms = pauses.get(at);
  if (ms) await new Promise((ok) => setTimeout(ok, ms));
}
