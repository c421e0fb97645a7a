import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import type { SecretMetadata } from '../../src/secrets/store.js';
import { scratchDir } from '../support/scratch.js';

/** A fake customer key in the service's format: `kmsc_` + 43 base64url chars. */
export function fakeKey(): string {
  return `kmsc_${randomBytes(32).toString('base64url')}`;
}

export function meta(name: string, extra: Partial<SecretMetadata> = {}): SecretMetadata {
  const [projectEnv = 'acme-prod', client = 'web', key = 'primary'] = name.split('/');
  return {
    projectEnv,
    client,
    key,
    keyId: `key_${randomBytes(6).toString('hex')}`,
    issuedAt: '2026-01-02T03:04:05.000Z',
    expiresAt: null,
    ...extra,
  };
}

export interface Sandbox {
  dir: string;
  /** An environment whose age key file lives in the sandbox (never the user's own). */
  env: NodeJS.ProcessEnv;
  keyFile: string;
  cleanup(): Promise<void>;
}

export async function sandbox(): Promise<Sandbox> {
  const dir = scratchDir('kms-sync-secrets-');
  const keyFile = path.join(dir, 'age', 'keys.txt');
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: dir, SOPS_AGE_KEY_FILE: keyFile };
  return { dir, env, keyFile, cleanup: () => fs.rm(dir, { recursive: true, force: true }) };
}

/** Every string in `haystack` must not contain any of the secret values. */
export function expectNoSecrets(haystack: string, secrets: string[]): void {
  for (const s of secrets) {
    if (haystack.includes(s)) throw new Error(`a secret value leaked into a message of ${haystack.length} characters`);
  }
}
