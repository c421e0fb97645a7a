import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { spawn } from 'node:child_process';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { AgeKeys, defaultAgeKeyFile } from '../../src/secrets/age-keys.js';
import { type SopsFileStore, sopsUriToPath } from '../../src/secrets/sops/file-store.js';
import { SecretStoreError, redactSecrets } from '../../src/secrets/store.js';
import { openStore, supportedStoreSchemes } from '../../src/secrets/registry.js';
import { expectNoSecrets, fakeKey, meta, sandbox, type Sandbox } from './helpers.js';

let sb: Sandbox;
/** Every raw value handed to a store in this file: none may ever show up in an error. */
const values: string[] = [];
const key = (): string => {
  const v = fakeKey();
  values.push(v);
  return v;
};

beforeEach(async () => {
  sb = await sandbox();
});
afterEach(async () => {
  await sb.cleanup();
});

async function newStore(file = 'secrets.yaml', extra: Parameters<typeof openStore>[1] = {}): Promise<SopsFileStore> {
  return (await openStore(`sops:${file}`, { baseDir: sb.dir, env: sb.env, ...extra })) as SopsFileStore;
}

async function rejection(p: Promise<unknown>): Promise<SecretStoreError> {
  try {
    await p;
  } catch (err) {
    expect(err).toBeInstanceOf(SecretStoreError);
    const e = err as SecretStoreError;
    expectNoSecrets(`${e.message}\n${e.stack ?? ''}\n${String(e.cause ?? '')}`, values);
    return e;
  }
  throw new Error('expected a rejection');
}

describe('SOPS file store: round trip', () => {
  it('put / putMany / exists / existsMany / read / readAll / list', async () => {
    const store = await newStore();
    expect(store.kind).toBe('sops-file');
    expect(store.displayUri).toBe(`sops://${path.join(sb.dir, 'secrets.yaml')}`);
    expect(await store.exists('acme-prod/web/primary')).toBe(false);
    expect(await store.list()).toEqual([]);
    expect(await store.read('acme-prod/web/primary')).toBeUndefined();

    const a = key();
    await store.put('acme-prod/web/primary', a, meta('acme-prod/web/primary'));
    const b = key();
    const c = key();
    await store.putMany([
      {
        name: 'acme-prod/api/primary',
        value: b,
        meta: meta('acme-prod/api/primary', { expiresAt: '2027-01-01T00:00:00.000Z' }),
      },
      { name: 'acme-dev/api/primary', value: c, meta: meta('acme-dev/api/primary') },
    ]);

    expect(await store.exists('acme-prod/web/primary')).toBe(true);
    expect(await store.existsMany(['acme-prod/web/primary', 'acme-dev/api/primary', 'nope/x/y'])).toEqual(
      new Set(['acme-prod/web/primary', 'acme-dev/api/primary']),
    );
    expect(await store.read('acme-prod/web/primary')).toBe(a);
    expect(await store.read('acme-prod/api/primary')).toBe(b);
    expect(Object.fromEntries(await store.readAll())).toEqual({
      'acme-dev/api/primary': c,
      'acme-prod/api/primary': b,
      'acme-prod/web/primary': a,
    });

    const listing = await store.list();
    expect(listing.map((l) => l.name)).toEqual([
      'acme-dev/api/primary',
      'acme-prod/api/primary',
      'acme-prod/web/primary',
    ]);
    const api = listing.find((l) => l.name === 'acme-prod/api/primary');
    expect(api?.meta).toMatchObject({
      projectEnv: 'acme-prod',
      client: 'api',
      key: 'primary',
      expiresAt: '2027-01-01T00:00:00.000Z',
    });
    expect(Number.isNaN(Date.parse(api?.updatedAt ?? ''))).toBe(false);

    // Overwrite keeps one entry with the new value.
    const a2 = key();
    await store.put('acme-prod/web/primary', a2, meta('acme-prod/web/primary'));
    expect(await store.read('acme-prod/web/primary')).toBe(a2);
    expect((await store.list()).length).toBe(3);

    // A second instance (another process, in effect) reads the same.
    const other = await newStore();
    expect(await other.read('acme-prod/web/primary')).toBe(a2);
  });

  it('writes SOPS layout: only `value` encrypted, readable names and dates, mode 0600', async () => {
    const store = await newStore('sub/dir/secrets.yaml');
    const v = key();
    await store.put('acme-prod/web/primary', v, meta('acme-prod/web/primary', { keyId: 'key_123' }));
    const file = path.join(sb.dir, 'sub/dir/secrets.yaml');
    const text = await fs.readFile(file, 'utf8');
    expect(text).not.toContain(v);
    const doc = parseYaml(text) as {
      secrets: Record<string, Record<string, unknown>>;
      sops: Record<string, unknown> & { age: { recipient: string; enc: string }[] };
    };
    const entry = doc.secrets['acme-prod/web/primary'];
    expect(entry?.value).toMatch(/^ENC\[AES256_GCM,data:[^,]+,iv:[^,]+,tag:[^,]+,type:str\]$/);
    expect(entry).toMatchObject({
      projectEnv: 'acme-prod',
      client: 'web',
      key: 'primary',
      keyId: 'key_123',
      expiresAt: null,
    });
    expect(doc.sops.encrypted_regex).toBe('^value$');
    expect(doc.sops.version).toMatch(/^3\./);
    expect(doc.sops.lastmodified).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(doc.sops.mac).toMatch(/^ENC\[AES256_GCM,/);
    expect(doc.sops.age).toHaveLength(1);
    expect(doc.sops.age[0]?.enc).toMatch(
      /^-----BEGIN AGE ENCRYPTED FILE-----\n[\s\S]+-----END AGE ENCRYPTED FILE-----\n$/,
    );
    expect((await fs.stat(file)).mode & 0o777).toBe(0o600);
    expect((await fs.stat(path.dirname(file))).mode & 0o777).toBe(0o700);
    // No lock or temp file is left behind.
    expect((await fs.readdir(path.dirname(file))).sort()).toEqual(['secrets.yaml']);
  });

  it('keeps unchanged ciphertexts when other entries are added (small git diffs)', async () => {
    const store = await newStore();
    await store.put('e/c/a', key(), meta('e/c/a'));
    const before = parseYaml(await fs.readFile(store.path, 'utf8')) as { secrets: Record<string, { value: string }> };
    await store.put('e/c/b', key(), meta('e/c/b'));
    const after = parseYaml(await fs.readFile(store.path, 'utf8')) as { secrets: Record<string, { value: string }> };
    expect(after.secrets['e/c/a']?.value).toBe(before.secrets['e/c/a']?.value);
  });

  it('concurrent puts from one process all land', async () => {
    const store = await newStore();
    const entries = Array.from({ length: 8 }, (_, i) => ({ name: `e/c/k${i}`, value: key() }));
    await Promise.all(entries.map((e) => store.put(e.name, e.value, meta(e.name))));
    const all = await store.readAll();
    for (const e of entries) expect(all.get(e.name)).toBe(e.value);
  });

  it('putMany of nothing is a no-op and creates no file', async () => {
    const store = await newStore();
    await store.putMany([]);
    expect(await fs.readdir(sb.dir)).not.toContain('secrets.yaml');
  });
});

describe('SOPS file store: service target', () => {
  const LIVE = 'https://kms.example.com/api/v1#live';
  const TEST = 'https://kms.example.com/api/v1#test';

  /** The text of one entry of the file (its key line to the next entry or `sops:`). */
  const entryText = (text: string, name: string): string => {
    const start = text.indexOf(`    ${name}:\n`);
    expect(start).toBeGreaterThanOrEqual(0);
    const rest = text.slice(start + 1);
    const end = rest.search(/\n(?: {4}\S|\S)/);
    return text.slice(start, start + 1 + end + 1);
  };

  it('writes target as a plaintext field after keyId only when given; list returns it', async () => {
    const store = await newStore();
    const m = meta('acme-prod/web/primary', { keyId: 'key_live1', target: LIVE });
    await store.putMany([
      { name: 'acme-prod/web/primary', value: key(), meta: m },
      { name: 'acme-prod/api/primary', value: key(), meta: meta('acme-prod/api/primary', { keyId: 'key_legacy' }) },
    ]);
    const text = await fs.readFile(store.path, 'utf8');
    expect(entryText(text, 'acme-prod/web/primary')).toMatch(
      /^ {4}acme-prod\/web\/primary:\n {8}value: ENC\[[^\n]+\n {8}projectEnv: "acme-prod"\n {8}client: "web"\n {8}key: "primary"\n {8}keyId: "key_live1"\n {8}target: "https:\/\/kms\.example\.com\/api\/v1#live"\n {8}issuedAt: "[^"]+"\n {8}expiresAt: null\n {8}updatedAt: "[^"]+"\n$/,
    );
    // Without a target the entry is exactly the layout written before targets existed.
    expect(entryText(text, 'acme-prod/api/primary')).toMatch(
      /^ {4}acme-prod\/api\/primary:\n {8}value: ENC\[[^\n]+\n {8}projectEnv: "acme-prod"\n {8}client: "api"\n {8}key: "primary"\n {8}keyId: "key_legacy"\n {8}issuedAt: "[^"]+"\n {8}expiresAt: null\n {8}updatedAt: "[^"]+"\n$/,
    );
    const listing = await (await newStore()).list();
    expect(listing.find((l) => l.name === 'acme-prod/web/primary')?.meta).toEqual({
      projectEnv: 'acme-prod',
      client: 'web',
      key: 'primary',
      keyId: 'key_live1',
      target: LIVE,
      issuedAt: m.issuedAt,
      expiresAt: null,
    });
    const legacy = listing.find((l) => l.name === 'acme-prod/api/primary')?.meta;
    expect(legacy?.keyId).toBe('key_legacy');
    expect(legacy).not.toHaveProperty('target');
  });

  it('a file written without targets still reads, and adding a target entry leaves its entries byte for byte', async () => {
    const old = await newStore();
    const v = key();
    await old.put('acme-prod/web/primary', v, meta('acme-prod/web/primary'));
    const before = await fs.readFile(old.path, 'utf8');
    expect(before).not.toContain('target');
    const store = await newStore(); // another process, no cached state
    expect(await store.read('acme-prod/web/primary')).toBe(v);
    expect((await store.list())[0]?.meta).not.toHaveProperty('target');
    await store.put('acme-prod/api/primary', key(), meta('acme-prod/api/primary', { target: TEST }));
    const after = await fs.readFile(store.path, 'utf8');
    expect(entryText(after, 'acme-prod/web/primary')).toBe(entryText(before, 'acme-prod/web/primary'));
    const listing = await (await newStore()).list();
    expect(listing.map((l) => [l.name, l.meta?.target])).toEqual([
      ['acme-prod/api/primary', TEST],
      ['acme-prod/web/primary', undefined],
    ]);
    expect(await (await newStore()).read('acme-prod/web/primary')).toBe(v);
  });

  it('a rewrite replaces or drops the target with the entry; any text round-trips', async () => {
    const store = await newStore();
    const odd = 'prod – eu "blue": #1';
    await store.put('e/c/k', key(), meta('e/c/k', { target: LIVE }));
    await store.put('e/c/k', key(), meta('e/c/k', { target: odd }));
    expect((await (await newStore()).list())[0]?.meta?.target).toBe(odd);
    await store.put('e/c/k', key(), meta('e/c/k'));
    expect((await (await newStore()).list())[0]?.meta).not.toHaveProperty('target');
    expect(await fs.readFile(store.path, 'utf8')).not.toContain('target');
  });

  it('the MAC covers the target: a changed target is rejected as tampering', async () => {
    const store = await newStore();
    await store.put('acme-prod/web/primary', key(), meta('acme-prod/web/primary', { target: LIVE }));
    const text = await fs.readFile(store.path, 'utf8');
    expect(text).toContain(`target: "${LIVE}"`);
    await fs.writeFile(store.path, text.replace(`target: "${LIVE}"`, `target: "${TEST}"`));
    const fresh = await newStore();
    expect((await rejection(fresh.read('acme-prod/web/primary'))).code).toBe('INTEGRITY');
    expect((await rejection(fresh.put('acme-prod/x/primary', key(), meta('acme-prod/x/primary')))).code).toBe(
      'INTEGRITY',
    );
  });

  it('refuses a target that is not a non-empty string', async () => {
    const store = await newStore();
    for (const target of [42, '', null] as unknown as string[]) {
      const err = await rejection(store.put('e/c/k', key(), meta('e/c/k', { target })));
      expect(err.code).toBe('INVALID_ARGUMENT');
      expect(err.message).toContain("'target'");
    }
    expect(await store.exists('e/c/k')).toBe(false);
  });
});

describe('SOPS file store: integrity', () => {
  async function written(): Promise<{ store: SopsFileStore; text: string; a: string; b: string }> {
    const store = await newStore();
    const a = key();
    const b = key();
    await store.putMany([
      { name: 'acme-prod/web/primary', value: a, meta: meta('acme-prod/web/primary') },
      { name: 'acme-prod/api/primary', value: b, meta: meta('acme-prod/api/primary') },
    ]);
    return { store, text: await fs.readFile(store.path, 'utf8'), a, b };
  }

  /** Flips one byte inside the base64 `data:` of the first ENC[...] after `marker`. */
  function flipCiphertextByte(text: string, marker: string): string {
    const at = text.indexOf(marker);
    const re = /ENC\[AES256_GCM,data:([^,]+),/g;
    re.lastIndex = at;
    const m = re.exec(text);
    if (!m) throw new Error('no ENC value found');
    const raw = Buffer.from(m[1] as string, 'base64');
    raw[0] = (raw[0] as number) ^ 0x01;
    const start = m.index + 'ENC[AES256_GCM,data:'.length;
    return text.slice(0, start) + raw.toString('base64') + text.slice(start + (m[1] as string).length);
  }

  const tampered = async (store: SopsFileStore, text: string): Promise<void> => {
    await fs.writeFile(store.path, text);
    const fresh = await newStore(); // no cached state
    for (const op of [
      () => fresh.read('acme-prod/web/primary'),
      () => fresh.readAll(),
      () => fresh.put('acme-prod/new/primary', key(), meta('acme-prod/new/primary')),
      () => fresh.checkWritable(),
    ]) {
      const err = await rejection(op());
      expect(err.code).toBe('INTEGRITY');
      expect(err.message).toContain(store.path);
      expect(err.message).toMatch(/integrity|authentication|tampered/i);
    }
  };

  it('rejects a flipped byte in one value ciphertext', async () => {
    const { store, text } = await written();
    await tampered(store, flipCiphertextByte(text, 'acme-prod/web/primary:'));
  });

  it('the instance that wrote and listed the file rejects a tamper of the same size (its caches hold the old bytes)', async () => {
    const { store, text, a } = await written();
    // The instance holds the file it verified and (after list) a parse: a flipped byte keeps the size.
    expect((await store.list()).map((l) => l.name)).toContain('acme-prod/web/primary');
    const bad = flipCiphertextByte(text, 'acme-prod/web/primary:');
    expect(bad.length).toBe(text.length);
    await fs.writeFile(store.path, bad);
    expect((await store.list()).map((l) => l.name)).toContain('acme-prod/web/primary'); // plaintext names: no MAC check
    for (const op of [
      () => store.read('acme-prod/web/primary'),
      () => store.put('acme-prod/new/primary', key(), meta('acme-prod/new/primary')),
      () => store.checkWritable(),
    ]) {
      expect((await rejection(op())).code).toBe('INTEGRITY');
    }
    expect(await fs.readFile(store.path, 'utf8')).toBe(bad); // nothing written over it
    await fs.writeFile(store.path, text);
    expect(await store.read('acme-prod/web/primary')).toBe(a);
    // Another instance lists the good file (a parse it may decrypt later), then the file changes.
    const other = await newStore();
    expect(await other.list()).toHaveLength(2);
    await fs.writeFile(store.path, bad);
    expect((await rejection(other.read('acme-prod/web/primary'))).code).toBe('INTEGRITY');
  });

  it('rejects a flipped byte in the MAC', async () => {
    const { store, text } = await written();
    await tampered(store, flipCiphertextByte(text, '    mac: '));
  });

  it('rejects a changed plaintext field (MAC covers it)', async () => {
    const { store, text } = await written();
    expect(text).toContain('client: "web"');
    await tampered(store, text.replace('client: "web"', 'client: "evil"'));
  });

  it('rejects values swapped between entries (the path is authenticated)', async () => {
    const { store, text } = await written();
    const encs = [...text.matchAll(/value: (ENC\[[^\]]+\])/g)].map((m) => m[1] as string);
    expect(encs).toHaveLength(2);
    const swapped = text
      .replace(encs[0] as string, '@@A@@')
      .replace(encs[1] as string, encs[0] as string)
      .replace('@@A@@', encs[1] as string);
    await tampered(store, swapped);
  });

  it('rejects a removed entry (MAC mismatch)', async () => {
    const { store, text } = await written();
    const doc = parseYaml(text) as { secrets: Record<string, unknown> };
    const start = text.indexOf('    acme-prod/api/primary:');
    const end = text.indexOf('    acme-prod/web/primary:');
    expect(Object.keys(doc.secrets)).toHaveLength(2);
    await tampered(store, text.slice(0, start) + text.slice(end));
  });

  it('rejects a tampered data-key wrapping', async () => {
    const { store, text } = await written();
    const lines = text.split('\n');
    const i = lines.findIndex((l) => l.includes('-----BEGIN AGE ENCRYPTED FILE-----'));
    const l = lines[i + 3] as string;
    lines[i + 3] = l.slice(0, -2) + (l.at(-2) === 'A' ? 'B' : 'A') + l.at(-1);
    await fs.writeFile(store.path, lines.join('\n'));
    const err = await rejection((await newStore()).read('acme-prod/web/primary'));
    expect(['INTEGRITY', 'NO_IDENTITY']).toContain(err.code);
  });

  it('rejects a file that is not YAML, naming the file and no content', async () => {
    const { store } = await written();
    await fs.writeFile(store.path, 'secrets: [unclosed\n  value: kmsc_not-a-real-key-but-looks-like-one-000000000\n');
    const err = await rejection((await newStore()).exists('x'));
    expect(err.code).toBe('PARSE');
    expect(err.message).toContain(store.path);
    expect(err.message).not.toContain('kmsc_');
  });

  it('rejects a file with a secret listed twice (a merge gone wrong), naming the key', async () => {
    const { store } = await written();
    const text = await fs.readFile(store.path, 'utf8');
    const entry = /^ {4}(acme-prod\/web\/primary):\n(?: {8}.*\n)+/m.exec(text);
    expect(entry).not.toBeNull();
    await fs.writeFile(store.path, text.replace(entry![0], entry![0] + entry![0]));
    const err = await rejection((await newStore()).exists('x'));
    expect(err.code).toBe('PARSE');
    expect(err.message).toContain(`duplicate key "${entry![1]}"`);
  });

  it('rejects a YAML file without sops metadata', async () => {
    const store = await newStore();
    await fs.writeFile(store.path, 'secrets: {}\n');
    const err = await rejection(store.put('e/c/k', key(), meta('e/c/k')));
    expect(err.code).toBe('PARSE');
    expect(err.message).toMatch(/sops/);
  });
});

describe('age identity', () => {
  it('is created on first use at SOPS_AGE_KEY_FILE, 0600 in a 0700 directory, with a back-up notice', async () => {
    const notices: string[] = [];
    const store = await newStore('secrets.yaml', { onNotice: (m) => notices.push(m) });
    await expect(fs.stat(sb.keyFile)).rejects.toThrow();
    await store.checkWritable();
    const text = await fs.readFile(sb.keyFile, 'utf8');
    const lines = text.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^# created: \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$/);
    expect(lines[1]).toMatch(/^# public key: age1[a-z0-9]{58}$/);
    expect(lines[2]).toMatch(/^AGE-SECRET-KEY-1[0-9A-Z]{58}$/);
    expect((await fs.stat(sb.keyFile)).mode & 0o777).toBe(0o600);
    expect((await fs.stat(path.dirname(sb.keyFile))).mode & 0o777).toBe(0o700);
    expect(notices).toHaveLength(1);
    const recipient = (lines[1] as string).slice('# public key: '.length);
    expect(notices[0]).toContain(recipient);
    expect(notices[0]).toContain(sb.keyFile);
    expect(notices[0]).toMatch(/back this file up: without it the secrets cannot be decrypted/i);
    expect(notices[0]).not.toContain('AGE-SECRET-KEY');
    // Second use: no new identity, no notice.
    await store.put('e/c/k', key(), meta('e/c/k'));
    await (await newStore('secrets.yaml', { onNotice: (m) => notices.push(m) })).checkWritable();
    expect(notices).toHaveLength(1);
    expect(await fs.readFile(sb.keyFile, 'utf8')).toBe(text);
  });

  it('defaults: $XDG_CONFIG_HOME/sops/age/keys.txt, else ~/.config/sops/age/keys.txt', () => {
    expect(defaultAgeKeyFile({ SOPS_AGE_KEY_FILE: '/k/file.txt', XDG_CONFIG_HOME: '/x' })).toBe('/k/file.txt');
    expect(defaultAgeKeyFile({ XDG_CONFIG_HOME: '/x', HOME: '/h' })).toBe('/x/sops/age/keys.txt');
    expect(defaultAgeKeyFile({ HOME: '/h' })).toBe('/h/.config/sops/age/keys.txt');
  });

  it('uses XDG_CONFIG_HOME when creating the identity', async () => {
    const env = { HOME: sb.dir, XDG_CONFIG_HOME: path.join(sb.dir, 'xdg') };
    const store = (await openStore('sops:s.yaml', { baseDir: sb.dir, env })) as SopsFileStore;
    await store.put('e/c/k', key(), meta('e/c/k'));
    await fs.access(path.join(sb.dir, 'xdg', 'sops', 'age', 'keys.txt'));
  });

  it('accepts SOPS_AGE_KEY (identity in the environment) and then creates no key file', async () => {
    const keys = new AgeKeys({ env: sb.env });
    await keys.recipients(); // creates an identity file...
    const identity = (await fs.readFile(sb.keyFile, 'utf8'))
      .split('\n')
      .find((l) => l.startsWith('AGE-SECRET-KEY-1')) as string;
    const env = { HOME: sb.dir, SOPS_AGE_KEY: identity, SOPS_AGE_KEY_FILE: path.join(sb.dir, 'none', 'keys.txt') };
    const store = (await openStore('sops:env.yaml', { baseDir: sb.dir, env })) as SopsFileStore;
    const v = key();
    await store.put('e/c/k', v, meta('e/c/k'));
    expect(await store.read('e/c/k')).toBe(v);
    await expect(fs.stat(path.join(sb.dir, 'none'))).rejects.toThrow();
    // ...and the file-based identity (same key) reads it too.
    expect(await (await newStore('env.yaml')).read('e/c/k')).toBe(v);
  });

  it('wraps the data key for extra recipients too; each can decrypt alone', async () => {
    const team = await sandbox();
    try {
      const teamKeys = new AgeKeys({ env: team.env });
      const [teamRecipient] = await teamKeys.recipients();
      const store = await newStore('shared.yaml', { recipients: [teamRecipient as string] });
      const v = key();
      await store.put('e/c/k', v, meta('e/c/k'));
      const doc = parseYaml(await fs.readFile(store.path, 'utf8')) as { sops: { age: { recipient: string }[] } };
      expect(doc.sops.age.map((a) => a.recipient)).toContain(teamRecipient);
      expect(doc.sops.age).toHaveLength(2);
      const asTeam = (await openStore(`sops://${store.path}`, { env: team.env })) as SopsFileStore;
      expect(await asTeam.read('e/c/k')).toBe(v);
      // The team member can add entries; the original recipient keeps access.
      const w = key();
      await asTeam.put('e/c/k2', w, meta('e/c/k2'));
      expect(await (await newStore('shared.yaml')).read('e/c/k2')).toBe(w);
    } finally {
      await team.cleanup();
    }
  });

  it('encrypts to the first identity of a multi-identity key file only (others decrypt)', async () => {
    const other = await sandbox();
    try {
      const [first] = await new AgeKeys({ env: sb.env }).recipients();
      const [second] = await new AgeKeys({ env: other.env }).recipients();
      await fs.appendFile(sb.keyFile, await fs.readFile(other.keyFile, 'utf8'));
      const store = await newStore('multi.yaml');
      await store.put('e/c/k', key(), meta('e/c/k'));
      const doc = parseYaml(await fs.readFile(store.path, 'utf8')) as { sops: { age: { recipient: string }[] } };
      expect(doc.sops.age.map((a) => a.recipient)).toEqual([first]);
      expect(second).not.toBe(first);
    } finally {
      await other.cleanup();
    }
  });

  it('rejects malformed recipients clearly', async () => {
    const err = await rejection(newStore('x.yaml', { recipients: ['age1notarecipient'] }));
    expect(err.code).toBe('INVALID_ARGUMENT');
    expect(err.message).toMatch(/age recipient/);
  });

  it('a file encrypted for someone else: clear error, no values, checkWritable fails', async () => {
    const store = await newStore('theirs.yaml');
    await store.put('e/c/k', key(), meta('e/c/k'));
    const stranger = await sandbox();
    try {
      const other = (await openStore(`sops://${store.path}`, { env: stranger.env })) as SopsFileStore;
      await new AgeKeys({ env: stranger.env }).recipients();
      for (const op of [
        () => other.read('e/c/k'),
        () => other.checkWritable(),
        () => other.put('e/c/x', key(), meta('e/c/x')),
      ]) {
        const err = await rejection(op());
        expect(err.code).toBe('NO_IDENTITY');
        expect(err.message).toMatch(/age1/);
      }
      // Names remain readable without the key.
      expect(await other.exists('e/c/k')).toBe(true);
    } finally {
      await stranger.cleanup();
    }
  });

  it('reading without any identity fails clearly and creates none', async () => {
    const store = await newStore();
    await store.put('e/c/k', key(), meta('e/c/k'));
    const env = { HOME: sb.dir, SOPS_AGE_KEY_FILE: path.join(sb.dir, 'missing', 'keys.txt') };
    const err = await rejection(((await openStore(`sops://${store.path}`, { env })) as SopsFileStore).read('e/c/k'));
    expect(err.code).toBe('NO_IDENTITY');
    await expect(fs.stat(path.join(sb.dir, 'missing'))).rejects.toThrow();
  });
});

describe('openStore and names', () => {
  it('selects the SOPS file store by URI', async () => {
    const abs = path.join(sb.dir, 'a', 'abs.yaml');
    for (const [uri, expected] of [
      [`sops://${abs}`, abs],
      [`sops://localhost${abs}`, abs],
      [`file://${abs}`, abs],
      ['sops:rel/secrets.yaml', path.join(sb.dir, 'rel/secrets.yaml')],
      ['file:rel/secrets.yaml', path.join(sb.dir, 'rel/secrets.yaml')],
      ['SOPS:with%20space.yaml', path.join(sb.dir, 'with space.yaml')],
    ] as const) {
      const store = await openStore(uri, { baseDir: sb.dir, env: sb.env });
      expect(store.kind).toBe('sops-file');
      expect((store as SopsFileStore).path).toBe(expected);
      expect(store.displayUri).toBe(`sops://${expected}`);
    }
    expect(sopsUriToPath('sops:x.yaml', '/base')).toBe('/base/x.yaml');
  });

  it('unknown schemes fail clearly, listing the supported ones, without credentials', async () => {
    expect(supportedStoreSchemes()).toEqual(expect.arrayContaining(['sops:', 'file:']));
    const err = await rejection(openStore('nosuchstore://admin:hunter2@vault.example:8200/secret/kms'));
    expect(err.code).toBe('UNKNOWN_SCHEME');
    expect(err.message).toMatch(/unknown store scheme 'nosuchstore:'/);
    expect(err.message).toContain('sops:');
    expect(err.message).toContain('file:');
    expect(err.message).not.toContain('hunter2');
    expect((await rejection(openStore('/just/a/path.yaml'))).code).toBe('UNKNOWN_SCHEME');
    expect((await rejection(openStore('sops://remote.host/x.yaml'))).code).toBe('INVALID_URI');
    expect((await rejection(openStore('sops:'))).code).toBe('INVALID_URI');
    expect((await rejection(openStore('sops:x.yaml?mode=1'))).code).toBe('INVALID_URI');
  });

  it('secretName is deterministic and keeps ordinary names readable', async () => {
    const store = await newStore();
    expect(store.secretName('acme-prod/web-app/primary')).toBe('acme-prod/web-app/primary');
    expect(store.secretName('acme-prod/Web App/primäry')).toBe('acme-prod/Web%20App/prim%C3%A4ry');
    expect(store.secretName('a/b:c/d')).toBe(store.secretName('a/b:c/d'));
    expect(store.secretName('a/b:c/d')).toBe('a/b%3Ac/d');
    expect(() => store.secretName('a//b')).toThrow(SecretStoreError);
  });

  it('validates put arguments without echoing values', async () => {
    const store = await newStore();
    expect((await rejection(store.put('', key(), meta('e/c/k')))).code).toBe('INVALID_ARGUMENT');
    expect((await rejection(store.put('e/c/k', '', meta('e/c/k')))).code).toBe('INVALID_ARGUMENT');
    expect((await rejection(store.put('e/c/k', key(), { ...meta('e/c/k'), keyId: 5 as unknown as string }))).code).toBe(
      'INVALID_ARGUMENT',
    );
  });
});

describe('locking and writability', () => {
  it('breaks a stale lock left by a dead process', async () => {
    const store = await newStore();
    const child = spawn(process.execPath, ['-e', '0']);
    const pid = child.pid as number;
    await new Promise((r) => child.on('exit', r));
    await fs.writeFile(
      store.lockPath,
      JSON.stringify({ pid, host: (await import('node:os')).hostname(), createdAt: new Date().toISOString() }),
    );
    const v = key();
    await store.put('e/c/k', v, meta('e/c/k'));
    expect(await store.read('e/c/k')).toBe(v);
    await expect(fs.stat(store.lockPath)).rejects.toThrow();
  });

  it('waits for a live lock, then fails with LOCKED naming the holder', async () => {
    const store = await newStore('locked.yaml', { lockTimeoutMs: 300 });
    await fs.writeFile(
      store.lockPath,
      JSON.stringify({ pid: 1, host: (await import('node:os')).hostname(), createdAt: 'then' }),
    );
    const err = await rejection(store.put('e/c/k', key(), meta('e/c/k')));
    expect(err.code).toBe('LOCKED');
    expect(err.message).toContain('pid 1');
    expect(err.message).toContain(store.lockPath);
    expect((await rejection(store.checkWritable())).code).toBe('LOCKED');
  });

  it('checkWritable fails on a read-only directory', async () => {
    if (process.getuid?.() === 0) {
      // root ignores directory permissions; use a path under a regular file instead
      await fs.writeFile(path.join(sb.dir, 'plainfile'), '');
      const store = await newStore('plainfile/secrets.yaml');
      const err = await rejection(store.checkWritable());
      expect(err.code).toBe('NOT_WRITABLE');
      expect(err.message).toContain(store.displayUri);
      return;
    }
    await fs.mkdir(path.join(sb.dir, 'ro'), { mode: 0o500 });
    const err = await rejection((await newStore('ro/secrets.yaml')).checkWritable());
    expect(err.code).toBe('NOT_WRITABLE');
  });
});

describe('errors never carry secret values', () => {
  it('SecretStoreError redacts anything shaped like a customer key or an age secret key', () => {
    const v = key();
    const e = new SecretStoreError(`oops ${v} and AGE-SECRET-KEY-1ABCDEF`, { code: 'IO' });
    expect(e.message).not.toContain(v);
    expect(e.message).not.toContain('AGE-SECRET-KEY-1ABCDEF');
    expect(redactSecrets(`x ${v} y`)).toBe('x kmsc_[REDACTED] y');
  });

  it('none of the values used in this file appeared in any error above', () => {
    expect(values.length).toBeGreaterThan(0); // rejection() checked every error against `values`
  });
});
