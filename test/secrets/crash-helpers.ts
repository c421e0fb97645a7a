// Crash safety: writers are SIGKILLed at random moments, again and again. Every put / append that
// was acknowledged (the child prints `ack` only after the promise resolved) must survive, and the
// files must never be corrupt. Children run the sources bundled once per test file (bundleChild):
// one child started from the TypeScript sources (Node stripping the types of ~140 modules, the
// packages' included) cost ~0.7 CPU-s before its first write, from the bundle ~0.2; a file starts 30.
import { spawn, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'rolldown';
import { scratchDir } from '../support/scratch.js';

const here = path.dirname(fileURLToPath(import.meta.url));
export const ITERATIONS = Number(process.env.KMS_SYNC_CRASH_ITERATIONS ?? 30);

export interface Run {
  child: ChildProcess;
  lines: string[];
  /** Resolves when the child has loaded its modules and waits for `go` on stdin. */
  ready: Promise<void>;
  /** Resolves at the child's first complete output line after `ready` (its first acknowledgement). */
  firstLine: Promise<void>;
  exited: Promise<void>;
  /** Lets the child start writing. */
  go(): void;
}

/**
 * A child script of fixtures/ with the sources and packages it imports bundled into one ES module,
 * in a scratch folder (removed after the test file). Its dynamic imports are inlined: the child
 * still loads everything before it says `ready`.
 */
export async function bundleChild(script: string): Promise<string> {
  const file = path.join(scratchDir('kms-sync-crash-child-'), script.replace(/\.ts$/, '.mjs'));
  await build({
    input: path.join(here, 'fixtures', script),
    platform: 'node',
    logLevel: 'silent',
    write: true,
    output: { file, format: 'esm', codeSplitting: false },
  });
  return file;
}

/** Starts a child from a bundle of bundleChild. */
export function startChild(bundle: string, args: string[], env: NodeJS.ProcessEnv): Run {
  const child = spawn(process.execPath, [bundle, ...args], {
    env,
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const lines: string[] = [];
  let buf = '';
  let stderr = '';
  let markReady!: () => void;
  const ready = new Promise<void>((resolve) => {
    markReady = resolve;
  });
  let markFirstLine!: () => void;
  const firstLine = new Promise<void>((resolve) => {
    markFirstLine = resolve;
  });
  child.stdout!.setEncoding('utf8');
  child.stdout!.on('data', (d: string) => {
    buf += d;
    let nl: number;
    while ((nl = buf.indexOf('\n')) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (line === 'ready') markReady();
      else {
        lines.push(line); // only complete lines count as acknowledgements
        markFirstLine();
      }
    }
  });
  child.stderr!.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  // Once its pipes closed: 'exit' can come before the last of its output is read, and the last
  // acknowledgement before a kill is the one most worth checking.
  const exited = new Promise<void>((resolve, reject) => {
    child.on('close', (code, signal) => {
      markReady();
      markFirstLine();
      if (signal === 'SIGKILL') resolve();
      else reject(new Error(`writer exited on its own (code ${code}): ${stderr.slice(0, 2000)}`));
    });
  });
  child.stdin!.on('error', () => undefined); // the child may be dead already
  return { child, lines, ready, firstLine, exited, go: () => void child.stdin!.write('go\n') };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Runs `iterations` rounds of `writers` children each. The next round's children are spawned while
 * the current round runs (they load their modules, then wait for `go`), so rounds cost little more
 * than the random time to the kill. `afterRound` checks the files after every round.
 */
export async function crashRounds(opts: {
  iterations: number;
  writers: number;
  spawn: (round: number, writer: number) => Run;
  afterRound: (round: number, runs: Run[]) => Promise<void>;
}): Promise<void> {
  const batch = (round: number): Run[] => Array.from({ length: opts.writers }, (_, w) => opts.spawn(round, w));
  let next: Run[] = batch(0);
  const live = new Set<Run>(next);
  try {
    for (let round = 0; round < opts.iterations; round += 1) {
      const runs = next;
      await Promise.all(runs.map((r) => r.ready));
      for (const r of runs) r.go();
      next = round + 1 < opts.iterations ? batch(round + 1) : [];
      for (const r of next) live.add(r);
      await killRandomly(runs, round % 2 === 1);
      for (const r of runs) live.delete(r);
      await opts.afterRound(round, runs);
    }
  } finally {
    for (const r of live) r.child.kill('SIGKILL'); // never leave a child behind when a round fails
  }
}

/**
 * Kills each child at a random moment. A cold first write takes ~0.5 s on a quiet machine and
 * several seconds at a load of 30, so a fixed window alone could kill every child before it wrote
 * anything: with `afterFirstWrite` (every other round) the window starts at the child's first
 * acknowledgement, so the rounds always cover kills between and during later writes too.
 */
export async function killRandomly(runs: Run[], afterFirstWrite = false): Promise<void> {
  await Promise.all(
    runs.map(async (r) => {
      await r.ready;
      if (afterFirstWrite) await r.firstLine;
      await sleep(Math.floor(Math.random() * (afterFirstWrite ? 400 : 900)));
      r.child.kill('SIGKILL');
      await r.exited;
    }),
  );
}
