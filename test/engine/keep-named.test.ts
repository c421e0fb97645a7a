// keepNamed (engine/plan-env.ts) keeps, of an environment's live state, the clients and endpoints
// its plan names (and the clients whose keys expire) for the apply: a client is looked up by its
// name among the names its environment's addresses carry, not by an address built per client. It
// must keep exactly what a lookup by address keeps, environments whose names prefix each other's
// and names with slashes included.
import { describe, expect, it } from 'vitest';
import { keepNamed } from '../../src/engine/plan-env.js';
import { address, emptyLiveState, type LiveState } from '../../src/model/index.js';
import type { Plan } from '../../src/plan/types.js';
import { xorshift32 } from '../support/xorshift.js';

/** What keepNamed keeps, found by each client's and endpoint's address. */
function byAddress(state: LiveState, plan: Plan): LiveState {
  const named = new Set<string>();
  for (const x of [...plan.operations, ...plan.unmanaged]) {
    named.add(x.address);
    if (x.address.startsWith('key.')) named.add(`client.${x.address.slice(4, x.address.lastIndexOf('/'))}`);
  }
  return {
    ...emptyLiveState(),
    templates: [...state.templates],
    clients: state.clients.filter(
      (c) => c.keys.some((k) => k.expiresAt) || named.has(address.client(c.projectEnv, c.name)),
    ),
    endpoints: state.endpoints.filter((e) => named.has(address.endpoint(e.projectEnv, e.method, e.path))),
  };
}

describe('keepNamed', () => {
  it('keeps what a lookup by address keeps', () => {
    const next = xorshift32(11);
    const envs = ['p-a', 'p-ab', 'p-a/x', 'q-a'];
    const names = ['c0', 'c1', 'x/c0', 'c0/k', 'a/x', ''];
    for (let round = 0; round < 200; round++) {
      const state: LiveState = emptyLiveState();
      for (let i = next(12); i > 0; i--) {
        const projectEnv = envs[next(envs.length)]!;
        const name = names[next(names.length)]!;
        const expiresAt = next(8) === 0 ? '2030-01-01T00:00:00Z' : undefined;
        state.clients.push({
          id: `id-${round}-${i}`,
          projectEnv,
          name,
          keys: [{ id: `k${i}`, name: 'k', ...(expiresAt ? { expiresAt } : {}) }],
        } as unknown as LiveState['clients'][number]);
      }
      for (let i = next(4); i > 0; i--)
        state.endpoints.push({
          projectEnv: envs[next(envs.length)]!,
          method: 'GET',
          path: `/r/${next(3)}`,
        } as unknown as LiveState['endpoints'][number]);
      const pick = (): string => {
        const pe = envs[next(envs.length)]!;
        const n = names[next(names.length)]!;
        const kind = next(3);
        return kind === 0
          ? address.client(pe, n)
          : kind === 1
            ? address.key(pe, n, 'k')
            : address.endpoint(pe, 'GET', `/r/${next(3)}`);
      };
      const plan = {
        operations: Array.from({ length: next(4) }, () => ({ address: pick() })),
        unmanaged: Array.from({ length: next(2) }, () => ({ address: pick() })),
      } as unknown as Plan;
      const kept = emptyLiveState();
      keepNamed(kept, state, plan);
      const want = byAddress(state, plan);
      expect(kept.clients).toEqual(want.clients);
      expect(kept.endpoints).toEqual(want.endpoints);
      expect(kept.templates).toEqual(want.templates);
    }
  });
});
