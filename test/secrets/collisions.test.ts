// The secret-name check of a configuration (secrets/collisions.ts): two keys that would write one
// secret are refused, whichever path the check takes for each key. Keys named by default in a store
// that keeps their names skip the map of names taken (a plan of 100,000 clients would build 200,000
// of them); these cases are the ways another key can still take such a name.
import { describe, expect, it } from 'vitest';
import { loadDesiredStateFromSources } from '../../src/config/load.js';
import { secretCollisions } from '../../src/secrets/collisions.js';
import { StoreRegistry } from '../../src/secrets/registry.js';
import { DEFAULT_POLICY } from '../../src/model/policy.js';
import { SopsFileStore } from '../../src/secrets/sops/file-store.js';

/** A configuration of one environment: `stores` and `clients` are YAML lines, indented in place. */
function config(clients: string, stores = '') {
  const text = `apiVersion: kms-sync/v1
${stores ? `stores:\n${stores}\n` : ''}projects:
  - slug: twin
    name: Twin
    environments:
      - type: production
        url: https://t.example
        templates: [{ name: std, rateLimitDay: 10 }]
        clients:
${clients}
`;
  return loadDesiredStateFromSources([{ file: 'kms.yaml', text }], { env: {} });
}

async function problems(clients: string, stores = '') {
  const desired = config(clients, stores);
  return secretCollisions(
    desired,
    new StoreRegistry({
      declarations: desired.stores,
      baseDir: '/nonexistent/base',
      policy: { ...DEFAULT_POLICY, storeHosts: ['127.0.0.1:9'] },
      env: {},
    }),
  );
}

const collisions = async (clients: string, stores = '') =>
  (await problems(clients, stores)).filter((p) => p.kind === 'collision').map((p) => p.text);

describe('secret names that collide', () => {
  it('none among keys named by default, in any store', async () => {
    const vault = '  - { name: vault, uri: "vault://127.0.0.1:9/secret/kms" }';
    expect(
      await problems(
        `
          - { name: a, template: std, keys: [{ name: k0 }, { name: k1 }] }
          - { name: b, template: std, keys: [{ name: k0 }, { name: k1, secret: { store: vault } }] }
          - { name: c, template: std, keys: [{ name: k0, secret: { store: vault } }] }`,
        vault,
      ),
    ).toEqual([]);
  });

  it('a key given its own name that another key has by default, before or after it', async () => {
    const later = await collisions(`
          - { name: a, template: std, keys: [{ name: k }] }
          - { name: b, template: std, keys: [{ name: k, secret: { name: twin-production/a/k } }] }`);
    expect(later).toHaveLength(1);
    expect(later[0]).toMatch(
      /^key\.twin-production\/a\/k \(kms\.yaml:\d+:\d+\) and key\.twin-production\/b\/k \(kms\.yaml:\d+:\d+\) would both write the secret "twin-production\/a\/k" in sops:\/\/\/nonexistent\/base\//,
    );
    const earlier = await collisions(`
          - { name: b, template: std, keys: [{ name: k, secret: { name: twin-production/a/k } }] }
          - { name: a, template: std, keys: [{ name: k }] }`);
    // The same message (places aside): desired clients come in name order.
    const placeless = (texts: string[]) => texts.map((t) => t.replace(/kms\.yaml:\d+:\d+/g, 'kms.yaml'));
    expect(placeless(earlier)).toEqual(placeless(later));
  });

  it('two store names for one file: a default name in one, the same name given in the other', async () => {
    const stores = '  - { name: one, uri: "sops:same.sops.yaml" }\n  - { name: two, uri: "file:./same.sops.yaml" }';
    const found = await collisions(
      `
          - { name: a, template: std, keys: [{ name: k, secret: { store: one } }] }
          - { name: b, template: std, keys: [{ name: k, secret: { store: two, name: twin-production/a/k } }] }`,
      stores,
    );
    expect(found).toHaveLength(1);
    expect(found[0]).toContain(
      'would both write the secret "twin-production/a/k" in sops:///nonexistent/base/same.sops.yaml',
    );
  });

  it('a name the default file store encodes against one it keeps as it is', async () => {
    // "x y" is written as x%20y: the same key as a name that holds %20 itself.
    const found = await collisions(`
          - { name: a, template: std, keys: [{ name: k, secret: { name: twin-production/x%20y/k } }] }
          - { name: b, template: std, keys: [{ name: k, secret: { name: twin-production/x y/k } }] }`);
    expect(found).toHaveLength(1);
    expect(found[0]).toContain('would both write the secret "twin-production/x%20y/k"');
  });

  it('a default name another key gives itself, in stores that rename and in stores without a fast answer', async () => {
    // GitHub secret names are upper case (twin-production/a/k is TWIN_PRODUCTION__A__K); Vault's
    // paths keep these names, but it has no keepsDefaultName: its secretName answers.
    const stores =
      '  - { name: gh, uri: "github://acme/infra" }\n  - { name: vault, uri: "vault://127.0.0.1:9/secret/kms" }';
    const found = await collisions(
      `
          - { name: a, template: std, keys: [{ name: k, secret: { store: gh } }] }
          - { name: b, template: std, keys: [{ name: k, secret: { store: gh, name: twin-production/a/k } }] }
          - { name: c, template: std, keys: [{ name: k, secret: { store: vault } }] }
          - { name: d, template: std, keys: [{ name: k, secret: { store: vault, name: twin-production/c/k } }] }`,
      stores,
    );
    expect(found).toHaveLength(2);
    expect(found[0]).toMatch(
      /^key\.twin-production\/a\/k .* and key\.twin-production\/b\/k .* would both write the secret "TWIN_PRODUCTION__A__K" in github:/,
    );
    expect(found[1]).toMatch(
      /^key\.twin-production\/c\/k .* and key\.twin-production\/d\/k .* would both write the secret "twin-production\/c\/k" in vault:/,
    );
  });

  it("the default file store's fast answer (keepsSegment) is what its secretName does", () => {
    const store = new SopsFileStore('/nonexistent/base/s.sops.yaml', { env: {} });
    const parts = [
      'acme-production',
      'web',
      'k0',
      'a.b_c~d',
      'x%20y',
      'x y',
      'é',
      'a/b',
      'A-Z',
      'tab\there',
      '..',
      'plus+',
    ];
    let kept = 0;
    for (const pe of parts)
      for (const c of parts)
        for (const k of ['primary', ...parts]) {
          const logical = `${pe}/${c}/${k}`;
          let same = false;
          try {
            same = store.secretName(logical) === logical;
          } catch {
            same = false;
          }
          // Agreement wherever no part holds a `/` (the collision check never asks otherwise).
          if (![pe, c, k].some((p) => p.includes('/')))
            expect(store.keepsSegment(pe) && store.keepsSegment(c) && store.keepsSegment(k), logical).toBe(same);
          if (same) kept++;
        }
    expect(kept).toBeGreaterThan(100);
  });
});
