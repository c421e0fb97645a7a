// planEnvironment (engine/plan-env.ts) starts an environment's live read before it takes the
// environment's configuration, so the read's pages are in flight while the clients are built (a
// plan worker's read waited for them, which left the 1,000,000-client plan's cores idle). The
// order of failures stays what it was: a configuration that does not build is told first, even
// when the read fails too, and the read's failure leaves no unhandled rejection behind.
import { describe, expect, it } from 'vitest';
import { planEnvironment, type PartSettings } from '../../src/engine/plan-env.js';
import type { DesiredState } from '../../src/model/index.js';

const desired = {} as DesiredState;
const settings = {} as PartSettings;
const noPresence = async () => ({ results: [], warnings: [] });

/** One environment planned with these take and read. */
const planWith = (
  take: () => Promise<Pick<DesiredState, 'clients' | 'endpoints'>>,
  read: Parameters<typeof planEnvironment>[1]['read'],
) =>
  planEnvironment(
    settings,
    { pe: 'p-prod', desired, envDef: undefined, templates: [], orphans: [], take, read },
    noPresence,
  );

/** A promise settled from outside. */
function later<T>() {
  let resolve!: (v: T) => void;
  let reject!: (e: Error) => void;
  const promise = new Promise<T>((ok, no) => {
    resolve = ok;
    reject = no;
  });
  return { promise, resolve, reject };
}

describe('planEnvironment', () => {
  it('starts the read while the configuration is still being taken, and tells a take failure first', async () => {
    const events: string[] = [];
    const take = later<Pick<DesiredState, 'clients' | 'endpoints'>>();
    const planned = planWith(
      () => {
        events.push('take');
        return take.promise;
      },
      async () => {
        events.push('read');
        throw new Error('the service is unreachable');
      },
    );
    // The take has not settled, and the read has begun.
    await new Promise((ok) => setImmediate(ok));
    expect(events).toContain('read');
    take.reject(new Error('kms.yaml:3: clients[0].name is missing'));
    await expect(planned).rejects.toThrow('kms.yaml:3: clients[0].name is missing');
  });

  it("tells the read's failure once the configuration is taken", async () => {
    const planned = planWith(
      async () => ({ clients: [], endpoints: [] }),
      async () => {
        throw new Error('the service is unreachable');
      },
    );
    await expect(planned).rejects.toThrow('the service is unreachable');
  });
});
