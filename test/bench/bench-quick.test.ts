// The benchmark's quick mode (tiny sizes, no latency, one run) still works end to end: the
// emulator process, seeding, every scenario as a fresh kms-sync process on a real configuration
// file, the baselines, the results file. The figures themselves are never asserted (they depend
// on the machine); only that each scenario ran, did what it claims and reported them.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/cli.js';
import { scratchDir } from '../support/scratch.js';
import { patient } from '../support/patience.js';

interface ScenarioResult {
  key: string;
  mode: string;
  skipped?: string;
  kmsSync: {
    wallMs: number;
    totalRequests: number;
    maxRssMB: number;
    requests: Record<string, number>;
    phases: Record<string, number>;
  };
  baseline?: { wallMs: number; totalRequests: number };
  ratio?: { time: number; requests: number };
  limit?: { requests: number };
}

describe('npm run bench -- --quick', () => {
  it(
    'runs every scenario as a whole process and writes a results file',
    async () => {
      const out = path.join(scratchDir('kms-sync-bench-'), 'results.json');
      const { code, stdout, stderr } = await new Promise<{ code: number; stdout: string; stderr: string }>(
        (resolve) => {
          execFile(
            process.execPath,
            [path.join(repoRoot, 'bench', 'run.js'), '--quick', '--out', out],
            { cwd: repoRoot, maxBuffer: 16 * 1024 * 1024 },
            (error, so, se) =>
              resolve({ code: error ? Number((error as { code?: unknown }).code ?? 1) : 0, stdout: so, stderr: se }),
          );
        },
      );
      expect(code, stderr).toBe(0);
      expect(stdout).toContain('| #  | scenario');

      const results = JSON.parse(readFileSync(out, 'utf8')) as {
        mode: string;
        machine: { cores: number; node: string };
        scenarios: ScenarioResult[];
      };
      expect(results.mode).toBe('quick');
      expect(results.machine.cores).toBeGreaterThan(0);
      expect(results.scenarios.map((s) => s.key)).toEqual([
        'startup',
        'validate-10k',
        'validate-10k-json',
        'noop-10k',
        'noop-100k',
        'create-1k',
        'update-1pct',
        'rotate-100',
        'diff-100k',
        'cdktf-10k',
        'terraform-plan-1k',
        'fleet',
        'fleet-apply',
      ]);
      const cdktf = results.scenarios.find((s) => s.key === 'cdktf-10k') as ScenarioResult & {
        synthMs: number;
        planFromOutput: { wallMs: number };
      };
      expect(cdktf.synthMs).toBeGreaterThan(0);
      expect(cdktf.planFromOutput.wallMs).toBeGreaterThan(0);
      for (const s of results.scenarios.filter((x) => !x.skipped)) {
        expect(s.kmsSync.wallMs, s.key).toBeGreaterThan(0);
        if (s.mode === 'terraform') {
          // Terraform's own plan is timed, next to terraform_data's: no kms-sync process of ours to measure.
          const tf = s as ScenarioResult & { terraformData: { wallMs: number }; ratio: { time: number } };
          expect(tf.terraformData.wallMs, s.key).toBeGreaterThan(0);
          expect(tf.ratio.time, s.key).toBeGreaterThan(0);
          continue;
        }
        expect(s.kmsSync.maxRssMB, s.key).toBeGreaterThan(0);
        if (s.mode === 'diff') continue;
        // The process's own phase breakdown is there, beside its whole-process wall time.
        expect(s.kmsSync.phases.startupMs, s.key).toBeGreaterThan(0);
        if (s.mode !== 'startup') expect(s.kmsSync.phases.configMs, s.key).toBeGreaterThan(0);
        if (['noop', 'update', 'create', 'rotate', 'cdktf'].includes(s.mode)) {
          expect(s.kmsSync.phases.readMs, s.key).toBeGreaterThan(0);
          expect(s.kmsSync.totalRequests, s.key).toBeGreaterThan(0);
        }
        if (s.mode === 'noop') expect(s.kmsSync.totalRequests, s.key).toBe(s.limit!.requests);
      }
      // The fleet, environment by environment: one project list, one read per project, each environment's pages.
      const fleet = results.scenarios.find((x) => x.key === 'fleet') as ScenarioResult & {
        fleets: { projects: number; envsPerProject: number; emulatorMaxRssMB: number }[];
      };
      for (const f of fleet.fleets) expect(f.emulatorMaxRssMB).toBeGreaterThan(0);
      expect(fleet.kmsSync.totalRequests).toBe(
        1 + fleet.fleets[0]!.projects + 2 * fleet.fleets[0]!.projects * fleet.fleets[0]!.envsPerProject,
      );
      for (const key of ['noop-10k', 'noop-100k', 'update-1pct']) {
        const s = results.scenarios.find((x) => x.key === key)!;
        expect(s.baseline?.totalRequests, key).toBeGreaterThan(0);
        expect(s.ratio?.requests, key).toBeGreaterThan(0);
      }
    },
    patient(180_000),
  );
});
