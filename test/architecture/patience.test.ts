// The tests' wall-clock limits (test/support/patience.ts): scaled by the load per core, 1 to 8,
// or by KMS_SYNC_TEST_PATIENCE; waitFor ends as soon as its condition holds, or false at the limit.
import { availableParallelism, loadavg } from 'node:os';
import { afterEach, describe, expect, it } from 'vitest';
import { patience, patient, waitFor } from '../support/patience.js';

const saved = process.env.KMS_SYNC_TEST_PATIENCE;
afterEach(() => {
  if (saved === undefined) delete process.env.KMS_SYNC_TEST_PATIENCE;
  else process.env.KMS_SYNC_TEST_PATIENCE = saved;
});

describe('patience', () => {
  it('is the load per core, at least 1 and at most 8', () => {
    delete process.env.KMS_SYNC_TEST_PATIENCE;
    const perCore = loadavg()[0]! / availableParallelism();
    const p = patience();
    expect(p).toBeGreaterThanOrEqual(1);
    expect(p).toBeLessThanOrEqual(8);
    // The load moves between the two reads: within a little of what it was.
    expect(Math.abs(p - Math.min(8, Math.max(1, perCore)))).toBeLessThan(1);
  });

  it('KMS_SYNC_TEST_PATIENCE sets the factor; a value that is not a positive number is ignored', () => {
    process.env.KMS_SYNC_TEST_PATIENCE = '3';
    expect(patient(10_000)).toBe(30_000);
    process.env.KMS_SYNC_TEST_PATIENCE = 'x';
    expect(patience()).toBeGreaterThanOrEqual(1);
    process.env.KMS_SYNC_TEST_PATIENCE = '-2';
    expect(patience()).toBeGreaterThanOrEqual(1);
  });

  it('waitFor returns true once the condition holds, false when the scaled limit passes', async () => {
    process.env.KMS_SYNC_TEST_PATIENCE = '1';
    let n = 0;
    expect(await waitFor(() => ++n >= 3, 10_000)).toBe(true);
    expect(n).toBe(3);
    const t = Date.now();
    expect(await waitFor(() => false, 100)).toBe(false);
    expect(Date.now() - t).toBeGreaterThanOrEqual(100);
  });

  it('waitFor with a wake sign asks the condition when the sign moves, every `every` ms otherwise, and at the limit', async () => {
    process.env.KMS_SYNC_TEST_PATIENCE = '1';
    // A sign that never moves: asked at the start, then about every 100 ms (not every 10), and once at the limit.
    let asks = 0;
    const never = () => {
      asks++;
      return false;
    };
    expect(await waitFor(never, 450, { wake: () => 0, every: 100 })).toBe(false);
    // At 10 ms it would be ~45 asks; timers late on a loaded machine only make fewer.
    expect(asks).toBeGreaterThanOrEqual(2);
    expect(asks).toBeLessThanOrEqual(8);
    // A sign that moves: asked at once, well before `every` would.
    let sign = 0;
    let seen = -1;
    setTimeout(() => {
      sign = 1;
    }, 50);
    const t = Date.now();
    expect(
      await waitFor(
        () => {
          seen = sign;
          return sign === 1;
        },
        10_000,
        { wake: () => sign, every: 5_000 },
      ),
    ).toBe(true);
    expect(seen).toBe(1);
    expect(Date.now() - t).toBeLessThan(2_000);
    // The condition that comes true between two asks is seen at the limit's last ask. It comes true
    // right after the first ask, not by a timer: a process stalled across the limit (a loaded host)
    // ran waitFor's own timer first, and its last ask came before the flag's timer.
    let flag = false;
    let asked = 0;
    const becomesTrue = () => {
      asked++;
      const was = flag;
      flag = true;
      return was;
    };
    expect(await waitFor(becomesTrue, 300, { wake: () => 0, every: 60_000 })).toBe(true);
    expect(asked).toBe(2);
  });
});
