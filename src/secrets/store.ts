/**
 * The secret-store interface every backend implements and the error type they throw. The
 * URI-based selection of a backend (`openStore`, the backend table) is in registry.ts: the
 * backends import this file for the interface, so it imports none of them.
 *
 * A raw customer key must never appear in an error message, a log line or a plan. Backends build
 * their messages from names, paths and codes only; `SecretStoreError` additionally redacts
 * anything shaped like a customer key as a last line of defence.
 */

import { createHash } from 'node:crypto';
export { SecretStoreError, redactSecrets, describeIoError } from './errors.js';
export type { SecretStoreErrorCode, SecretStoreErrorOptions } from './errors.js';
import { SecretStoreError, redactSecrets } from './errors.js';
import type { AgeKeys } from './age-keys.js';
import type { StateIncarnation } from './fsutil.js';
import { redactUserinfo } from '../model/redact.js';

export interface SecretMetadata {
  projectEnv: string;
  client: string;
  key: string;
  keyId: string;
  expiresAt?: string | null;
  issuedAt: string;
  /**
   * The service target that issued the key (model/target.ts). Absent on secrets written before
   * targets were recorded: those are taken as the current target's when their key id is live there.
   */
  target?: string;
}

/**
 * A short stand-in for a service target, for backends whose metadata cannot hold the full value
 * (GCP labels: lowercase `[a-z0-9_-]`, 63 characters; an AWS tag or a GitLab description too short
 * for a long target): `t-` and the first 40 hex digits of the target's SHA-256. It is a valid
 * value everywhere (GCP and Kubernetes labels, AWS and Azure tags). Backends return the full
 * target from `list()` wherever they can; where they cannot, `meta.target` is this tag, and
 * `targetMatches` compares either form.
 */
export function targetTag(target: string): string {
  return `t-${createHash('sha256').update(target, 'utf8').digest('hex').slice(0, 40)}`;
}

/**
 * Whether a listed `meta.target` names `target`: the same string, or its `targetTag`. False when
 * the listing carries no target (a secret written before targets were recorded: unknown).
 */
export function targetMatches(listed: string | undefined, target: string): boolean {
  if (typeof listed !== 'string') return false;
  return listed === target || listed === targetTag(target);
}

export interface SecretEntry {
  name: string;
  value: string;
  meta: SecretMetadata;
}

export interface SecretListing {
  name: string;
  updatedAt: string;
  meta?: Partial<SecretMetadata>;
}

export interface SecretStore {
  /** 'sops-file', later 'vault', 'aws-sm', ... */
  readonly kind: string;
  /** Where the secrets go, for humans. Never contains credentials. */
  readonly displayUri: string;
  /** Backend name rules: logical name `<project_env>/<client>/<key>` → backend-legal name (deterministic). */
  secretName(logical: string): string;
  /**
   * Optional: whether `secretName` keeps this segment of a name as it is, so that a default name
   * (`<project_env>/<client>/<key>`) of three such segments is its own name in the store. Answered
   * per segment, without building names: the collision check asks it for every client and key of
   * a configuration (secrets/collisions.ts).
   */
  keepsSegment?(segment: string): boolean;
  /** Throws SecretStoreError when the store is not reachable or not writable. */
  checkWritable(): Promise<void>;
  put(name: string, value: string, meta: SecretMetadata): Promise<void>;
  /** Batched put with the same guarantees as `put` (one atomic write for the file store). */
  putMany(entries: SecretEntry[]): Promise<void>;
  exists(name: string): Promise<boolean>;
  existsMany(names: string[]): Promise<Set<string>>;
  /** Where the backend allows reading values back. */
  read?(name: string): Promise<string | undefined>;
  list?(): Promise<SecretListing[]>;
  /**
   * Where the backend allows it: removes secrets, each only if it still holds the key given
   * (`keyId`, checked atomically with the removal). Returns the names removed.
   */
  deleteMany?(targets: { name: string; keyId?: string }[]): Promise<string[]>;
}

/**
 * Splits a logical name `<project_env>/<client>/<key>` into its parts; throws on anything else.
 */
export function splitLogicalName(logical: string): { projectEnv: string; client: string; key: string } {
  const parts = logical.split('/');
  if (parts.length !== 3 || parts.some((p) => p.length === 0)) {
    throw new SecretStoreError(`invalid logical secret name '${logical}': expected '<project_env>/<client>/<key>'`, {
      code: 'INVALID_ARGUMENT',
    });
  }
  const [projectEnv, client, key] = parts as [string, string, string];
  return { projectEnv, client, key };
}

export function logicalName(projectEnv: string, client: string, key: string): string {
  return `${projectEnv}/${client}/${key}`;
}

// ---------------------------------------------------------------------------------------------
// What a backend is (the table of backends and `openStore` are in registry.ts)

export interface OpenStoreOptions {
  /** Relative store paths (`sops:relative/path.yaml`) resolve against this directory (the config file's). Default: cwd. */
  baseDir?: string;
  /** This store's age recipients (team / cluster keys, `age1…`) its data key is wrapped for, besides the local identity. */
  recipients?: string[];
  /** A recipient may be added to a store file that already holds secrets (the operator policy's allowNewRecipients). */
  allowNewRecipients?: boolean;
  /** Environment to read SOPS_AGE_KEY, SOPS_AGE_KEY_FILE, XDG_CONFIG_HOME, HOME from. Default: process.env. */
  env?: NodeJS.ProcessEnv;
  /** Called with human notices the CLI should print (e.g. "created a new age identity, back it up"). */
  onNotice?: (message: string) => void;
  /** How long to wait for another kms-sync holding the store's lock. Default 10 s. */
  lockTimeoutMs?: number;
  /** Share one key provider between the store and the journal (then env/onNotice above are ignored). */
  ageKeys?: AgeKeys;
  /**
   * The declaration's `options:` (`stores: [{name, uri, options}]`), for backends that take
   * settings beyond the URI; URI query parameters take precedence.
   */
  options?: Record<string, unknown>;
  /**
   * The caller owns a state folder (the agent, agent/state-owner.ts): the lock files this store
   * takes record it, and ones an earlier incarnation of that owner left (a killed pid 1, a gone
   * pod) are broken at once instead of waited for (secrets/fsutil.ts earlierIncarnation).
   */
  incarnation?: StateIncarnation;
}

export interface StoreBackend {
  /** URI schemes (without ':') this backend answers to. */
  schemes: readonly string[];
  /** The accepted URI forms, for error messages. */
  forms: readonly string[];
  open(uri: string, opts: OpenStoreOptions): Promise<SecretStore>;
}

/** Drops any `user:password@` part so a URI can be quoted in a message. */
export function safeUriForMessage(uri: string): string {
  return redactSecrets(redactUserinfo(uri));
}
