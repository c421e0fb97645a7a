// Vitest global setup: with KMS_SYNC_TEST_CPU=1, or in CI, the run ends with the CPU-seconds the test
// files used (each file's worker and the processes it started, test/support/cpu-log.ts): the total
// and the costliest files. Wall times on CI's two cores measure the queue of three files; this says
// where the suite's time goes. The per-file log lives in the run's temporary folder (set up by
// test/support/temp-root.ts, listed before this file) and is removed here.
import { readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const SHOWN = 30;

export interface FileCpu {
  file: string;
  cpu: number;
  wall: number;
}

/** The report's lines: total, then the `shown` costliest files. */
export function cpuReport(entries: FileCpu[], shown = SHOWN): string[] {
  const total = entries.reduce((s, e) => s + e.cpu, 0);
  const sorted = [...entries].sort((a, b) => b.cpu - a.cpu || a.file.localeCompare(b.file));
  return [
    `CPU-seconds of the test files (worker and the processes it started): ${total.toFixed(0)} over ${entries.length} files; the ${Math.min(shown, entries.length)} costliest (CPU-s, wall s):`,
    ...sorted
      .slice(0, shown)
      .map((e) => `  ${e.cpu.toFixed(1).padStart(6)} ${e.wall.toFixed(1).padStart(6)}  ${e.file}`),
  ];
}

function wanted(): boolean {
  const ci = (process.env.CI ?? '').toLowerCase();
  return process.env.KMS_SYNC_TEST_CPU === '1' || (ci !== '' && ci !== '0' && ci !== 'false');
}

export default function setup(): (() => void) | undefined {
  if (!wanted() || process.platform !== 'linux') return undefined;
  const log = path.join(tmpdir(), 'kms-sync-test-cpu.jsonl');
  process.env.KMS_SYNC_TEST_CPU_LOG = log;
  return () => {
    let text = '';
    try {
      text = readFileSync(log, 'utf8');
    } catch {
      return; // no file finished
    }
    rmSync(log, { force: true });
    const entries = text
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as FileCpu);
    process.stdout.write(`\n${cpuReport(entries).join('\n')}\n`);
  };
}
