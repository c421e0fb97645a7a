// The diff's comparison of JSON values (plan/compare.ts sameJson): objects are compared by their keys
// and values, not by how they are written. Two equal objects must plan nothing; any difference at
// any depth must plan an update of that field.
import { describe, expect, it } from 'vitest';
import type { JsonObject, LiveEndpoint } from '../../src/model/index.js';
import { buildPlan } from '../../src/plan/diff.js';

const OWNER = 'diff-test';
const PE = 'shop-production';

function planEndpoint(
  desired: { request?: JsonObject; response?: JsonObject },
  live: { request: JsonObject; response: JsonObject },
) {
  const le: LiveEndpoint = {
    projectEnv: PE,
    method: 'GET',
    path: '/v1/orders',
    name: 'Orders',
    description: '',
    ...live,
    metadata: { 'managed-by': 'kms-sync', 'kms-sync/owner': OWNER },
  };
  const plan = buildPlan({
    desired: {
      projects: [{ slug: 'shop', name: 'Shop' }],
      envs: [{ project: 'shop', type: 'production', projectEnv: PE, url: 'https://api.shop.example' }],
      templates: [],
      clients: [],
      stores: [],
      owner: OWNER,
      endpoints: [
        {
          projectEnv: PE,
          method: 'GET',
          path: '/v1/orders',
          name: 'Orders',
          description: '',
          metadata: {},
          ...desired,
        },
      ],
    },
    live: {
      state: {
        projects: [{ slug: 'shop', name: 'Shop' }],
        envs: [{ id: 'e1', project: 'shop', projectEnv: PE, type: 'production', url: 'https://api.shop.example' }],
        templates: [],
        clients: [],
        endpoints: [le],
      },
      duplicates: [],
      fingerprints: {},
    },
    prune: false,
    now: new Date('2026-11-24T00:00:00Z'),
    target: { url: 'http://x', credential: 'test', projects: ['shop'], envs: [PE], owner: OWNER },
  });
  // The fields each operation changes (a changed request or response replaces the endpoint).
  return plan.operations.map((op) => op.changes.map((c) => c.path).join(','));
}

describe('JSON values in the diff', () => {
  const schema = {
    type: 'object',
    required: ['id'],
    properties: { id: { type: 'string' }, tags: { type: 'array', items: { type: 'string' } } },
  };

  it('equal objects plan nothing, whatever the key order', () => {
    expect(planEndpoint({ request: {}, response: {} }, { request: {}, response: {} })).toEqual([]);
    const reordered = {
      properties: { tags: { items: { type: 'string' }, type: 'array' }, id: { type: 'string' } },
      required: ['id'],
      type: 'object',
    };
    expect(
      planEndpoint(
        { request: schema, response: { ok: true, n: 1 } },
        { request: reordered, response: { n: 1, ok: true } },
      ),
    ).toEqual([]);
  });

  it('a difference at any depth changes that field', () => {
    const deeper = {
      ...schema,
      properties: { ...schema.properties, tags: { type: 'array', items: { type: 'number' } } },
    };
    expect(planEndpoint({ request: deeper, response: {} }, { request: schema, response: {} })).toEqual(['request']);
    expect(
      planEndpoint(
        { request: schema, response: {} },
        { request: { ...schema, required: ['id', 'tags'] }, response: {} },
      ),
    ).toEqual(['request']);
    // A key more, a key less, a key renamed with the same count, null against a missing key.
    expect(planEndpoint({ request: {}, response: { a: 1 } }, { request: {}, response: { a: 1, b: 2 } })).toEqual([
      'response',
    ]);
    expect(planEndpoint({ request: {}, response: { a: 1, b: 2 } }, { request: {}, response: { a: 1 } })).toEqual([
      'response',
    ]);
    expect(planEndpoint({ request: {}, response: { a: 1 } }, { request: {}, response: { b: 1 } })).toEqual([
      'response',
    ]);
    expect(planEndpoint({ request: { a: null }, response: {} }, { request: {}, response: {} })).toEqual(['request']);
    expect(planEndpoint({ request: { a: [] }, response: {} }, { request: { a: {} }, response: {} })).toEqual([
      'request',
    ]);
  });
});
