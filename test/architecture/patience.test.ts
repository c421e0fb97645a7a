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
});
