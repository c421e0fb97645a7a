// Template capacity (plan/capacity.ts) in process: which plans are refused before any write. The
// built CLI's refusal is test/cli/capacity.test.ts; these cases pin the counting rules, including
// the ones a plan touching few templates must still get right now that untouched templates'
// clients are not counted.
import { describe, expect, it } from 'vitest';
import type { LiveClient, LiveTemplate } from '../../src/model/index.js';
import { capacityProblems } from '../../src/plan/capacity.js';
import type { Operation } from '../../src/plan/types.js';

const ENV = 'acme_prod';
const template = (name: string, maxClients?: number): LiveTemplate => ({
  id: `t-${name}`,
  projectEnv: ENV,
  name,
  rateLimitDay: 1000,
  ...(maxClients === undefined ? {} : { maxClients }),
});
const client = (name: string, t: string): LiveClient =>
  ({
    id: `c-${name}`,
    projectEnv: ENV,
    name,
    templateId: `t-${t}`,
    ipWhitelist: [],
    metadata: {},
    keys: [],
  }) as LiveClient;
const op = (
  kind: Operation['kind'],
  action: Operation['action'],
  after: Record<string, unknown> | null,
  before: Record<string, unknown> | null = null,
): Operation => ({
  address: `${kind}.${ENV}/${(after ?? before)?.name}`,
  kind,
  action,
  projectEnv: ENV,
  reason: '',
  actionReason: 'changed' as Operation['actionReason'],
  before,
  after,
  changes: [],
});
const live = (templates: LiveTemplate[], clients: LiveClient[]) => ({ templates, clients });

describe('capacityProblems', () => {
  const full = live(
    [template('gold', 2), template('silver', 5)],
    [client('a', 'gold'), client('b', 'gold'), client('c', 'silver')],
  );

  it('a plan that touches no template and places no client refuses nothing, even on a template over its limit', () => {
    const over = live([template('gold', 1)], [client('a', 'gold'), client('b', 'gold')]);
    expect(capacityProblems({ operations: [] }, over)).toEqual([]);
    expect(capacityProblems({ operations: [op('client', 'delete', null, { name: 'a' })] }, over)).toEqual([]);
  });

  it('a client moved onto a full template is refused, counted with the clients already there', () => {
    const p = capacityProblems({ operations: [op('client', 'update', { name: 'c', template: 'gold' })] }, full);
    expect(p).toMatchObject([{ template: 'gold', limit: 2, now: 2, after: 3, peak: 3 }]);
  });

  it('a client moved out makes room: the same move the other way fits', () => {
    expect(capacityProblems({ operations: [op('client', 'update', { name: 'a', template: 'silver' })] }, full)).toEqual(
      [],
    );
  });

  it('a limit lowered below the clients a template holds is refused though no client moves', () => {
    const p = capacityProblems({ operations: [op('template', 'update', { name: 'silver', maxClients: 0 })] }, full);
    expect(p).toMatchObject([{ template: 'silver', limit: 0, now: 1, after: 1 }]);
  });

  it('a create that fits only once a delete has run is refused for its peak while applying', () => {
    const p = capacityProblems(
      {
        operations: [
          op('client', 'create', { name: 'd', template: 'gold' }),
          op('client', 'delete', null, { name: 'a' }),
        ],
      },
      full,
    );
    expect(p).toMatchObject([{ template: 'gold', limit: 2, now: 2, after: 2, peak: 3 }]);
  });

  it("a client that stays on its template is not counted twice, and another template's clients do not count", () => {
    const p = capacityProblems(
      {
        operations: [
          op('client', 'update', { name: 'a', template: 'gold' }),
          op('client', 'create', { name: 'e', template: 'silver' }),
        ],
      },
      full,
    );
    expect(p).toEqual([]);
  });
});
