// The benchmark's quick mode (tiny sizes, no latency, one run) still works end to end: emulator
// process, seeding, every scenario, the baselines, the results file. The figures themselves are
// never asserted (they depend on the machine); only that each scenario ran and reported them.
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/cli.js';

interface ScenarioResult {
  key: string;
  mode: string;
  kmsSync: { wallMs: number; totalRequests: number; maxRssMB: number; requests: Record<string, number>; emulatorTotal?: number };
  baseline?: { wallMs: number; totalRequests: number };
  ratio?: { time: number; requests: number };
  limit?: { requests: number };
}

describe('npm run bench -- --quick', () => {
  it('runs every scenario and writes a results file', async () => {
    const out = path.join(mkdtempSync(path.join(tmpdir(), 'kms-sync-bench-')), 'results.json');
    const { code, stdout, stderr } = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      execFile(process.execPath, [path.join(repoRoot, 'bench', 'run.js'), '--quick', '--out', out], { cwd: repoRoot, maxBuffer: 16 * 1024 * 1024 },
        (error, so, se) => resolve({ code: error ? Number((error as { code?: unknown }).code ?? 1) : 0, stdout: so, stderr: se }));
    });
    expect(code, stderr).toBe(0);
    expect(stdout).toContain('| # | scenario');

    const results = JSON.parse(readFileSync(out, 'utf8')) as { mode: string; machine: { cores: number; node: string }; scenarios: ScenarioResult[] };
    expect(results.mode).toBe('quick');
    expect(results.machine.cores).toBeGreaterThan(0);
    expect(results.scenarios.map((s) => s.key)).toEqual(['noop-10k', 'noop-100k', 'create-1k', 'update-1pct', 'diff-100k']);
    for (const s of results.scenarios) {
      expect(s.kmsSync.wallMs, s.key).toBeGreaterThan(0);
      expect(s.kmsSync.maxRssMB, s.key).toBeGreaterThan(0);
      if (s.mode === 'diff') continue;
      // kms-sync's own count and the emulator's agree: nothing is sent that is not counted.
      expect(s.kmsSync.emulatorTotal, s.key).toBe(s.kmsSync.totalRequests);
      expect(s.kmsSync.totalRequests, s.key).toBeGreaterThan(0);
    }
    for (const key of ['noop-10k', 'noop-100k', 'update-1pct']) {
      const s = results.scenarios.find((x) => x.key === key)!;
      expect(s.baseline?.totalRequests, key).toBeGreaterThan(0);
      expect(s.ratio?.requests, key).toBeGreaterThan(0);
    }
  }, 180_000);
});
