// The plan made environment by environment (engine/run.ts planFor, over live/read.ts
// readLiveStream) is the plan of one read of the whole fleet (planForWhole, the path before
// issue 37), field for field and byte for byte in every output: text, JSON, Markdown and the
// saved plan's object. Random fleets against the emulator over HTTP: projects whose slugs sort
// across each other's environments (a, a-b), duplicates, environments that left the
// configuration, new projects and environments, unmanaged and changed resources.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import {
  connect,
  loadConfig,
  planFor,
  planForWhole,
  type PlanOptions,
  type StreamedAttempt,
} from '../../src/engine/run.js';
import { scratchDir } from '../support/scratch.js';
import { expectSame, outputs, randomFleet } from '../support/fleet.js';
import { patient } from '../support/patience.js';

const API_KEY = 'sk_test_stream0123456789';
let emu: RunningEmulator;

beforeAll(async () => {
  emu = await startEmulator({ port: 0, apiKeys: [API_KEY] });
});
afterAll(async () => {
  await emu?.close();
});

describe('the streamed plan is the whole plan', () => {
  it(
    'on random fleets, in every output',
    async () => {
      const now = new Date('2026-11-27T12:00:00Z');
      const conn = connect({ url: emu.url, parallelism: 4 }, { KMS_API_URL: emu.url, KMS_API_KEY: API_KEY });
      let compared = 0;
      let withWarnings = 0;
      let withOps = 0;
      let streamedConfigs = 0;
      try {
        for (let seed = 1; seed <= 8; seed++) {
          const dir = scratchDir();
          const file = path.join(dir, 'kms-sync.yaml');
          writeFileSync(
            file,
            randomFleet(seed, `s${seed}`, (req) => emu.service.seed(req)),
          );
          const cfg = await loadConfig({ file: [file], env: [] }, undefined, () => undefined);
          const o: PlanOptions = {
            prune: seed % 3 === 0,
            baseDir: cfg.baseDir,
            policy: cfg.policy,
            secretCheck: false,
            forSaving: true,
            leaving: cfg.leaving,
            now,
            notice: () => undefined,
          };
          const whole = await planForWhole(conn, cfg.desired, o);
          emu.resetCounts();
          const streamed = await planFor(conn, cfg.desired, o);
          expectSame(outputs(streamed.plan), outputs(whole.plan), `seed ${seed}`);
          // The configuration itself loaded environment by environment (its clients and endpoints
          // read as each environment is planned): the same plan again.
          const attempt: StreamedAttempt = {};
          const byEnv = await loadConfig({ file: [file], env: [], stream: attempt }, undefined, () => undefined);
          // (A configuration of one environment with clients or endpoints is loaded whole.)
          if (byEnv.bodies) {
            expect(byEnv.desired.clients).toEqual([]);
            const streamedConfig = await planFor(conn, byEnv.desired, { ...o, bodies: byEnv.bodies });
            expectSame(outputs(streamedConfig.plan), outputs(whole.plan), `seed ${seed}, streamed configuration`);
            streamedConfigs++;
          }
          compared++;
          if (whole.plan.warnings.length > 1) withWarnings++;
          if (whole.plan.operations.length > 0) withOps++;
        }
      } finally {
        await conn.api.close();
      }
      // The fleets did exercise the merge: several warnings and operations to order.
      expect(compared).toBe(8);
      expect(withWarnings).toBeGreaterThan(1);
      expect(withOps).toBeGreaterThan(4);
      expect(streamedConfigs).toBeGreaterThan(4);
    },
    patient(120_000),
  );
});
