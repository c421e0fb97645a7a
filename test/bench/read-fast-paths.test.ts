// The shortcuts the benchmark numbers justified give exactly the answers of the generic code:
// the client fingerprint written field by field, the reader's page-by-page conversion, and its
// duplicate check that builds no address for a state without duplicates.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KmsClient } from '../../src/api/client.js';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { clientFingerprint, fingerprint, readLiveState } from '../../src/live/read.js';
import { canonicalCidrSet, type LiveClient } from '../../src/model/index.js';

const API_KEY = 'sk_test_fastpaths0123456789';
const WHITELISTS: Record<string, string[]> = {
  a: ['10.0.0.0/8'],
  b: ['10.0.0.0/8', '192.168.1.0/24'],
  c: ['192.168.1.0/24'],
  d: ['192.168.1.0/24'],
  e: ['192.168.1.0/24', '10.0.0.0/8'],
  f: [],
  g: ['10.0.0.0/8'],
};

describe('clientFingerprint', () => {
  const base: LiveClient = {
    id: 'c1',
    projectEnv: 'shop-production',
    name: 'globex',
    type: 'company',
    templateId: 't1',
    ipWhitelist: ['10.0.0.0/8'],
    metadata: { team: 'payments', 'managed-by': 'kms-sync' },
    keys: [{ id: 'k1', name: 'primary', expiresAt: null, autoRotate: false, createdAt: '2026-01-01T00:00:00.000Z' }],
  };
  const shapes: [string, unknown][] = [
    ["the reader's shape", base],
    ['with a template name', { ...base, templateName: 'gold' } satisfies LiveClient],
    ['no type, null template, no keys', { ...base, type: undefined, templateId: null, keys: [] }],
    [
      'keys without createdAt, with expiry',
      { ...base, keys: [{ id: 'k2', name: 'b', expiresAt: '2030-01-01T00:00:00.000Z', autoRotate: true }] },
    ],
    [
      'nested metadata with numeric keys',
      { ...base, metadata: { '10': 'a', '9': { z: [1, { b: 2, a: 1 }], a: null }, é: '"\\\n' } },
    ],
    ['escapes in names', { ...base, id: 'a"b', name: 'x\u0000y/z', ipWhitelist: ['1.2.3.4/32', '10.0.0.0/8'] }],
    ['an unknown field (generic path)', { ...base, extra: 1 }],
    ['a non-string whitelist entry (generic path)', { ...base, ipWhitelist: [1] }],
    [
      'a key of another shape (generic path)',
      { ...base, keys: [{ id: 'k', name: 'n', expiresAt: null, autoRotate: 'yes' }] },
    ],
  ];
  it.each(shapes)('equals the generic fingerprint: %s', (_, client) => {
    expect(clientFingerprint(client as LiveClient)).toBe(fingerprint(client));
  });
});

describe('readLiveState over several pages', () => {
  let emu: RunningEmulator;
  beforeAll(async () => {
    emu = await startEmulator({ apiKeys: [API_KEY] });
    emu.service.seed({
      project: 'big',
      type: 'production',
      templates: 3,
      clients: 250,
      keysPerClient: 2,
      endpoints: 5,
      metadata: { 'managed-by': 'kms-sync' },
    });
    emu.service.seed({ project: 'dup', type: 'production', templates: 1, clients: 120 });
    emu.service.seed({ project: 'slash', type: 'production', templates: 1, clients: 3 });
    const templateOf = (env: string) => (emu.service.listTemplates(env, 1, 10).data as { id: string }[])[0]!.id;
    // Two clients with one name, on different pages: neighbours once sorted.
    emu.service.createClients('dup-production', [{ name: 'client-00003', templateId: templateOf('dup-production') }]);
    // Names with a '/' take the full check.
    const t = templateOf('slash-production');
    emu.service.createClients('slash-production', [
      { name: 'a/b', templateId: t },
      { name: 'x/y', templateId: t },
      { name: 'x/y', templateId: t },
    ]);
    // Whitelists of one CIDR and of two, sharing their first: the reader's memo (cidrMemo) keys
    // a one-CIDR list by its string, a longer one by its JSON.
    emu.service.seed({ project: 'wl', type: 'production', templates: 1, clients: 0 });
    const w = templateOf('wl-production');
    emu.service.createClients(
      'wl-production',
      Object.entries(WHITELISTS).map(([name, ipWhitelist]) => ({ name, templateId: w, ipWhitelist })),
    );
  });
  afterAll(() => emu.close());

  const read = async (env: string) => {
    const api = new KmsClient({ baseUrl: emu.url, apiKey: API_KEY, parallelism: 2 });
    try {
      return {
        live: await readLiveState(api, { projects: [env.replace(/-production$/, '')], envs: [env] }),
        counts: { ...api.http.requestCounts },
      };
    } finally {
      await api.close();
    }
  };

  it('converts every page, sorts by identity and finds no duplicate where there is none', async () => {
    const { live, counts } = await read('big-production');
    expect(counts['list clients']).toBe(3);
    expect(counts['get client']).toBeUndefined();
    const names = live.state.clients.map((c) => c.name);
    expect(names).toHaveLength(250);
    expect(names).toEqual([...names].sort());
    expect(live.state.clients.every((c) => c.templateName?.startsWith('tpl-'))).toBe(true);
    expect(live.duplicates).toEqual([]);
    expect(Object.keys(live.fingerprints)).toHaveLength(1 + 1 + 3 + 250 + 5);
    const c = live.state.clients[7]!;
    expect(live.fingerprints[`client.big-production/${c.name}#${c.id}`]).toBe(fingerprint(c));
  });

  it("gives each client its own list's whitelist, shared frozen between the clients of one list", async () => {
    const { live } = await read('wl-production');
    const got = Object.fromEntries(live.state.clients.map((c) => [c.name, c.ipWhitelist]));
    const want = Object.fromEntries(Object.entries(WHITELISTS).map(([n, l]) => [n, canonicalCidrSet(l)]));
    expect(got).toEqual(want);
    // One array per distinct list read (a, g: one CIDR; c, d: another).
    const by = (n: string) => live.state.clients.find((c) => c.name === n)!.ipWhitelist;
    expect(by('a')).toBe(by('g'));
    expect(by('c')).toBe(by('d'));
    expect(by('a')).not.toBe(by('c'));
    // A write into one client's list would change the others': it throws, and changes nothing.
    for (const c of live.state.clients) {
      expect(Object.isFrozen(c.ipWhitelist)).toBe(true);
      expect(() => (c.ipWhitelist as string[]).push('1.2.3.4/32')).toThrow(TypeError);
    }
    expect(got).toEqual(want);
  });

  it.each([
    ['dup-production', 'client.dup-production/client-00003'],
    ['slash-production', 'client.slash-production/x/y'],
  ])('reports two live clients with one identity (%s)', async (env, address) => {
    const { live } = await read(env);
    expect(live.duplicates).toHaveLength(1);
    expect(live.duplicates[0]!.address).toBe(address);
    expect(live.duplicates[0]!.ids).toHaveLength(2);
  });
});
