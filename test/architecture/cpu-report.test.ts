// The CPU report at the end of a CI run (test/support/cpu-report.ts, cpu-log.ts): a file's figure
// counts the processes it started, and the report lists the costliest files first.
import { spawnSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { cpuSeconds } from '../support/cpu-log.js';
import { cpuReport } from '../support/cpu-report.js';
import { skipWhen } from '../support/skip.js';

describe.skipIf(
  skipWhen(process.platform !== 'linux', 'test/architecture/cpu-report.test.ts: reads /proc, which only Linux has'),
)('CPU report of the test files', () => {
  it("counts the CPU of the processes a file started and reaped (its children's /proc times)", () => {
    const before = cpuSeconds()!;
    // A child that spins until it has used 300 ms of CPU, however long a loaded machine makes that.
    const spin = 'while (process.cpuUsage().user + process.cpuUsage().system < 300_000);';
    const busy = spawnSync(process.execPath, ['-e', spin]);
    expect(busy.status).toBe(0);
    expect(cpuSeconds()! - before).toBeGreaterThan(0.25);
  });

  it('totals the files and lists the costliest first', () => {
    const lines = cpuReport(
      [
        { file: 'test/a.test.ts', cpu: 1.04, wall: 2 },
        { file: 'test/b.test.ts', cpu: 30.5, wall: 61.25 },
        { file: 'test/c.test.ts', cpu: 4, wall: 4 },
      ],
      2,
    );
    expect(lines[0]).toMatch(/: 36 over 3 files; the 2 costliest/);
    expect(lines.slice(1)).toEqual(['    30.5   61.3  test/b.test.ts', '     4.0    4.0  test/c.test.ts']);
  });
});
