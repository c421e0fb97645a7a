// Interoperability with independent implementations:
//  - the `age` CLI (Debian package `age`) decrypts the data-key wrapping we write, and our code
//    reads identities made by `age-keygen`;
//  - `sops-age` (an independent SOPS decoder on npm) decrypts our file to the same values;
//  - the MAC is recomputed here from the SOPS rules with node:crypto only;
//  - `sops -d`, when a `sops` binary is on PATH (neither Debian bookworm nor npm ships one).
// Tests needing the age CLI FAIL in CI when it is missing (CI installs it), unless SKIP_AGE_CLI=1;
// outside CI they skip with a loud line on stderr.
import { spawnSync } from 'node:child_process';
import { createDecipheriv, createHash } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { decryptSops } from 'sops-age';
import { parse as parseYaml } from 'yaml';
import { openStore } from '../../src/secrets/registry.js';
import type { SopsFileStore } from '../../src/secrets/sops/file-store.js';
import { fakeKey, meta, sandbox, type Sandbox } from './helpers.js';
import { skipWhen } from '../support/skip.js';

const hasCli = (cmd: string, args: string[]): boolean => spawnSync(cmd, args, { encoding: 'utf8' }).status === 0;
const AGE_CLI = hasCli('age', ['--version']) && hasCli('age-keygen', ['--version']);
// Required in CI (.ci/run installs it); on a developer's fresh machine these skip, loudly.
const CI = !['', '0', 'false'].includes((process.env.CI ?? '').toLowerCase());
const SKIP_AGE = process.env.SKIP_AGE_CLI === '1' || !CI;
const SOPS_CLI = hasCli('sops', ['--version']);

function requireAgeCli(): void {
  if (!AGE_CLI) {
    throw new Error('the `age` CLI is missing: install it (Debian: apt-get install -y age) or set SKIP_AGE_CLI=1');
  }
}

let sb: Sandbox;
beforeEach(async () => {
  sb = await sandbox();
});
afterEach(async () => {
  await sb.cleanup();
});

interface SopsDoc {
  secrets: Record<string, Record<string, string | null>>;
  sops: { age: { recipient: string; enc: string }[]; lastmodified: string; mac: string; encrypted_regex: string };
}

const TARGET = 'https://kms.example.com/api/v1#live';

async function writeSample(): Promise<{ store: SopsFileStore; values: Record<string, string> }> {
  const store = (await openStore('sops:secrets.yaml', { baseDir: sb.dir, env: sb.env })) as SopsFileStore;
  const values = {
    'acme-prod/web/primary': fakeKey(),
    'acme-prod/api/primary': fakeKey(),
    'acme-dev/web/primary': fakeKey(),
  };
  await store.putMany(
    Object.entries(values).map(([name, value]) => ({
      name,
      value,
      // Production entries record their service target (a plaintext field the MAC covers); the dev one has none.
      meta: meta(name, name.startsWith('acme-dev') ? { expiresAt: '2027-06-30T00:00:00.000Z' } : { target: TARGET }),
    })),
  );
  return { store, values };
}

/** Independent SOPS value decryption with node:crypto: AES-256-GCM, AAD = path components + ':'. */
function decryptEnc(enc: string, dataKey: Buffer, aad: string): string {
  const m = /^ENC\[AES256_GCM,data:(.*),iv:(.*),tag:(.*),type:str\]$/.exec(enc);
  if (!m) throw new Error('not an ENC value');
  const d = createDecipheriv('aes-256-gcm', dataKey, Buffer.from(m[2] as string, 'base64'));
  d.setAAD(Buffer.from(aad));
  d.setAuthTag(Buffer.from(m[3] as string, 'base64'));
  return Buffer.concat([d.update(Buffer.from(m[1] as string, 'base64')), d.final()]).toString('utf8');
}

describe.skipIf(
  skipWhen(
    SKIP_AGE && !AGE_CLI,
    'age CLI interop: the age CLI is not installed (apt-get install -y age); CI requires it',
  ),
)('age CLI interop', () => {
  it('`age -d -i keyfile` unwraps sops.age[0].enc to the 32-byte data key, which decrypts the values and the MAC', async () => {
    requireAgeCli();
    const { store, values } = await writeSample();
    const doc = parseYaml(await fs.readFile(store.path, 'utf8')) as SopsDoc;
    const blob = path.join(sb.dir, 'datakey.age');
    await fs.writeFile(blob, doc.sops.age[0]?.enc ?? '');
    const out = spawnSync('age', ['-d', '-i', sb.keyFile, blob]);
    expect(out.stderr.toString()).toBe('');
    expect(out.status).toBe(0);
    const dataKey = out.stdout;
    expect(dataKey.length).toBe(32);

    for (const [name, value] of Object.entries(values)) {
      expect(decryptEnc(doc.secrets[name]?.value as string, dataKey, `secrets:${name}:value:`)).toBe(value);
    }

    // The MAC, recomputed from SOPS's definition: SHA-512 over every non-null leaf in document
    // order (decrypted where encrypted), upper-case hex, encrypted with lastmodified as AAD.
    const h = createHash('sha512');
    for (const [name, entry] of Object.entries(doc.secrets)) {
      for (const [field, v] of Object.entries(entry)) {
        if (v === null) continue;
        h.update(field === 'value' ? decryptEnc(v, dataKey, `secrets:${name}:value:`) : v);
      }
    }
    expect(decryptEnc(doc.sops.mac, dataKey, doc.sops.lastmodified)).toBe(h.digest('hex').toUpperCase());
  });

  it('reads a store with an identity made by `age-keygen`, and `age` decrypts for it', async () => {
    requireAgeCli();
    const keyFile = path.join(sb.dir, 'keygen', 'keys.txt');
    await fs.mkdir(path.dirname(keyFile));
    const gen = spawnSync('age-keygen', ['-o', keyFile], { encoding: 'utf8' });
    expect(gen.status).toBe(0);
    const recipient = /age1[a-z0-9]+/.exec(gen.stderr)?.[0];
    const env = { HOME: sb.dir, SOPS_AGE_KEY_FILE: keyFile };
    const store = (await openStore('sops:kg.yaml', { baseDir: sb.dir, env })) as SopsFileStore;
    const v = fakeKey();
    await store.put('e/c/k', v, meta('e/c/k'));
    expect(await store.read('e/c/k')).toBe(v);
    const doc = parseYaml(await fs.readFile(store.path, 'utf8')) as SopsDoc;
    expect(doc.sops.age.map((a) => a.recipient)).toEqual([recipient]);
    await fs.writeFile(path.join(sb.dir, 'dk.age'), doc.sops.age[0]?.enc ?? '');
    const out = spawnSync('age', ['-d', '-i', keyFile, path.join(sb.dir, 'dk.age')]);
    expect(out.status).toBe(0);
    expect(out.stdout.length).toBe(32);
  });
});

describe('independent SOPS decoder (npm sops-age)', () => {
  it('decrypts our file to the same values and metadata', async () => {
    const { store, values } = await writeSample();
    const identity = (await fs.readFile(sb.keyFile, 'utf8')).split('\n').find((l) => l.startsWith('AGE-SECRET-KEY-1'));
    const decoded = (await decryptSops(await fs.readFile(store.path, 'utf8'), {
      secretKey: identity as string,
      fileType: 'yaml',
    })) as { secrets: Record<string, Record<string, unknown>> };
    expect(Object.keys(decoded.secrets).sort()).toEqual(Object.keys(values).sort());
    for (const [name, value] of Object.entries(values)) {
      const [projectEnv, client, key] = name.split('/');
      expect(decoded.secrets[name]).toMatchObject({ value, projectEnv, client, key });
    }
    expect(decoded.secrets['acme-dev/web/primary']?.expiresAt).toBe('2027-06-30T00:00:00.000Z');
    expect(decoded.secrets['acme-prod/web/primary']?.expiresAt).toBeNull();
    expect(decoded.secrets['acme-prod/web/primary']?.target).toBe(TARGET);
    expect(decoded.secrets['acme-prod/api/primary']?.target).toBe(TARGET);
    expect(decoded.secrets['acme-dev/web/primary']).not.toHaveProperty('target');
  });
});

describe.skipIf(
  skipWhen(
    !SOPS_CLI,
    'sops CLI interop: no sops binary on PATH (sops is not a Debian package here; our own MAC check still runs)',
  ),
)('sops CLI interop (only where a sops binary is installed)', () => {
  it('`sops -d` decrypts our file and verifies its MAC', async () => {
    const { store, values } = await writeSample();
    const out = spawnSync('sops', ['-d', store.path], { encoding: 'utf8', env: { ...sb.env } });
    expect(out.stderr).toBe('');
    expect(out.status).toBe(0);
    const doc = parseYaml(out.stdout) as { secrets: Record<string, { value: string }> };
    for (const [name, value] of Object.entries(values)) expect(doc.secrets[name]?.value).toBe(value);
  });
});
