// The Terraform crash scenarios (issue 24 c, d), short and seeded, with every `npm test`: the real
// terraform binary, killed (itself or its provider) at random and inside the windows, re-applied
// until it succeeds, and after each iteration Terraform loses track (state rm, a state cut to 0
// bytes, the .backup put back) and applies again; then live keys == kms_key resources, raw values
// held and valid, no provider left behind; and -replace revokes the old key. Skipped, saying so, without terraform on PATH.
import { describe, expect, it } from 'vitest';
import { formatFigures } from './lib.js';
import { findTerraform, runTerraform, runTerraformCi, SKIP_MESSAGE } from './terraform.js';
import { skipWhen } from '../support/skip.js';
import { patient } from '../support/patience.js';

const SEED = Number(process.env.KMS_SYNC_CRASH_SEED ?? 20261125);
const TERRAFORM = findTerraform();

describe.skipIf(skipWhen(!TERRAFORM, `${SKIP_MESSAGE.replace(/^SKIPPED: /, '')} (test/crash/terraform.test.ts)`))(
  'crash scenarios: terraform apply killed (issue 24 c, d)',
  () => {
    // 4 iterations: each kill window once, the provider and terraform killed in turn, each way of losing the state at least once (`npm run crash`: 25, random kills too).
    it(
      `seed ${SEED}: 4 iterations, each window once, terraform and provider killed, then state rm / a state cut to 0 bytes / the .backup put back; -replace revokes the old key`,
      async () => {
        const lines: string[] = [];
        const f = await runTerraform({ seed: SEED, iterations: 4, log: (l) => lines.push(l) });
        console.log(formatFigures(f));
        expect(f.failures, lines.join('\n')).toEqual([]);
        expect(f.keysLost).toBe(0);
        expect(f.strays).toBe(0);
        expect(f.killedTerraform).toBeGreaterThan(0);
        expect(f.killedProvider).toBeGreaterThan(0);
        expect(
          Object.values(f.stateLosses).every((n) => n > 0),
          JSON.stringify(f.stateLosses),
        ).toBe(true);
      },
      patient(900_000),
    );

    it(
      `seed ${SEED}: CI=true with a committed store: terraform apply issues nothing unless KMS_SYNC_ALLOW_LOCAL_STORE=1`,
      async () => {
        const lines: string[] = [];
        const f = await runTerraformCi({ seed: SEED, log: (l) => lines.push(l) });
        console.log(formatFigures(f));
        expect(f.failures, lines.join('\n')).toEqual([]);
      },
      patient(300_000),
    );
  },
);
