// Vitest setup file (each test file's worker): when the run reports CPU time (test/support/cpu-report.ts
// sets KMS_SYNC_TEST_CPU_LOG), each file appends one line to that file: the CPU-seconds of its
// worker and of every process the worker started and reaped (Linux /proc/self/stat: utime, stime,
// cutime, cstime), and its wall seconds. On a loaded or shared machine wall times measure the
// queue; CPU-seconds say what a file costs the suite.
import { appendFileSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, expect } from 'vitest';

/** Clock ticks per second of /proc/<pid>/stat: USER_HZ, 100 on every Linux ABI Node supports. */
const TICKS_PER_SECOND = 100;

/** CPU-seconds of this process and of its reaped children, or undefined where there is no /proc. */
export function cpuSeconds(): number | undefined {
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8');
    // The fields after the command name (which may hold spaces and parentheses), from field 3 on:
    // utime, stime, cutime, cstime are fields 14-17.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return [11, 12, 13, 14].reduce((s, i) => s + Number(f[i]), 0) / TICKS_PER_SECOND;
  } catch {
    return undefined;
  }
}

const log = process.env.KMS_SYNC_TEST_CPU_LOG;
if (log) {
  let started = Date.now();
  let file = '';
  beforeAll(() => {
    started = Date.now();
    file = path
      .relative(process.cwd(), expect.getState().testPath ?? '')
      .split(path.sep)
      .join('/');
  });
  // Registered before the file's own hooks, so it runs after them (vitest runs after-hooks in reverse).
  afterAll(() => {
    const cpu = cpuSeconds();
    if (cpu === undefined) return;
    // A worker shared by several files (test/support/shared-workers.ts) counts from the end of the
    // file before; the first file of a worker pays for the worker's start, as a file of its own does.
    const shared = globalThis as { kmsSyncCpuAtLastFile?: number };
    const since = cpu - (shared.kmsSyncCpuAtLastFile ?? 0);
    shared.kmsSyncCpuAtLastFile = cpu;
    appendFileSync(log, `${JSON.stringify({ file, cpu: since, wall: (Date.now() - started) / 1000 })}\n`);
  });
}
