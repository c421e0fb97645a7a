// Shared wiring of the commands: configuration → scope → API client → live state → plan.
import { stat } from 'node:fs/promises';
import path from 'node:path';
import { KmsClient } from '../api/client.js';
import { ConfigError, formatDiagnostic, formatDiagnostics, loadDesiredState } from '../config/index.js';
import { readLiveState, type LiveReadResult } from '../live/read.js';
import type { DesiredState } from '../model/index.js';
import { buildPlan } from '../plan/diff.js';
import { assessKeys, keysToCheck, type SecretStatus } from '../plan/key-health.js';
import { secretCollisions } from '../secrets/collisions.js';
import { checkSecretPresence } from '../secrets/presence.js';
import { StoreRegistry } from '../secrets/registry.js';
import { scopeDesired, unmatchedPatterns } from '../plan/scope.js';
import type { Plan } from '../plan/types.js';
import { UsageError } from './errors.js';
import { err } from './output.js';

export interface GlobalOptions {
  file: string[];
  env: string[];
  url?: string;
  parallelism: number;
  maxRps?: number;
}

export interface LoadedConfig {
  desired: DesiredState;
  files: string[];
  /** Folder of the first -f argument: relative store paths and the journal live here. */
  baseDir: string;
}

export async function loadConfig(o: Pick<GlobalOptions, 'file' | 'env'>): Promise<LoadedConfig> {
  if (o.file.length === 0) throw new UsageError('no configuration given: use -f FILE_OR_FOLDER (repeatable)');
  let loaded;
  performance.mark('kms:config-start');
  try {
    loaded = await loadDesiredState(o.file);
  } catch (e) {
    if (e instanceof ConfigError) throw new UsageError(`configuration is not valid:\n${formatDiagnostics(e.diagnostics)}`);
    throw e;
  }
  performance.mark('kms:config-end');
  for (const w of loaded.warnings) err(`warning: ${formatDiagnostic(w)}\n`);
  const unmatched = unmatchedPatterns(loaded.state, o.env);
  if (unmatched.length) {
    throw new UsageError(`--env ${unmatched.map((p) => JSON.stringify(p)).join(', ')} matches no environment of the configuration (known: ${loaded.state.envs.map((e) => e.projectEnv).join(', ') || 'none'})`);
  }
  const first = path.resolve(o.file[0]!);
  const baseDir = (await stat(first)).isDirectory() ? first : path.dirname(first);
  return { desired: scopeDesired(loaded.state, o.env), files: loaded.files, baseDir };
}

export function credentialKind(apiKey: string): Plan['target']['credential'] {
  return apiKey.startsWith('sk_live_') ? 'live' : apiKey.startsWith('sk_test_') ? 'test' : 'unknown';
}

export interface Connection {
  api: KmsClient;
  url: string;
  credential: Plan['target']['credential'];
}

/** The API client from KMS_API_URL / --url and KMS_API_KEY (never a command-line flag). */
export function connect(o: Pick<GlobalOptions, 'url' | 'parallelism' | 'maxRps'>, env: NodeJS.ProcessEnv = process.env, onRetry?: (line: string) => void): Connection {
  const url = o.url ?? env.KMS_API_URL;
  if (!url) throw new UsageError('no service URL: set KMS_API_URL or pass --url (e.g. http://127.0.0.1:8080/api/v1)');
  const apiKey = env.KMS_API_KEY;
  if (!apiKey) throw new UsageError('no credentials: set KMS_API_KEY to a project key (sk_live_… or sk_test_…)');
  try {
    new URL(url);
  } catch {
    throw new UsageError(`KMS_API_URL / --url is not a URL: ${JSON.stringify(url)}`);
  }
  const api = new KmsClient({
    baseUrl: url, apiKey, parallelism: o.parallelism, ...(o.maxRps ? { maxRps: o.maxRps } : {}), userAgent: 'kms-sync/0.1.0',
    ...(onRetry ? { onRetry: (r) => onRetry(`retrying ${r.method} ${r.path} in ${Math.round(r.delayMs)} ms (attempt ${r.attempt}: ${r.reason})`) } : {}),
  });
  return { api, url, credential: credentialKind(apiKey) };
}

export async function readLive(conn: Connection, desired: DesiredState, fingerprints: boolean): Promise<LiveReadResult> {
  performance.mark('kms:read-start');
  const live = await readLiveState(conn.api, { projects: desired.projects.map((p) => p.slug), envs: desired.envs.map((e) => e.projectEnv) }, { fingerprints });
  performance.mark('kms:read-end');
  return live;
}

export interface PlanOptions {
  prune: boolean;
  /** Folder of the configuration: where relative store paths resolve. */
  baseDir: string;
  /** Check that every managed key's secret is in its store (default true). */
  secretCheck?: boolean;
  /** `kms-sync rotate`: address globs of keys to rotate now, and whether to revoke the old ones at once. */
  force?: string[];
  revokeOld?: boolean;
  now?: Date;
  /** The plan will be saved (`--out`): record a fingerprint of every live object read. */
  forSaving?: boolean;
  /** Plan even when the configuration puts no environment in scope (`--allow-empty`). */
  allowEmpty?: boolean;
}

/** Refuses a configuration in which two keys would write one secret (one key would be lost). */
export async function checkSecretNames(desired: DesiredState, baseDir: string): Promise<void> {
  performance.mark('kms:names-start');
  const problems = await secretCollisions(desired, new StoreRegistry({ declarations: desired.stores, baseDir }));
  performance.mark('kms:names-end');
  const invalid = problems.filter((p) => p.kind !== 'collision').map((p) => p.text);
  const collide = problems.filter((p) => p.kind === 'collision').map((p) => `  - ${p.text}`);
  if (invalid.length) throw new UsageError(`configuration is not valid:\n${[...invalid, ...(collide.length ? ['secret names collide:', ...collide] : [])].join('\n')}`);
  if (collide.length) throw new UsageError(`secret names collide:\n${collide.join('\n')}`);
}

export async function planFor(conn: Connection, desired: DesiredState, o: PlanOptions): Promise<{ plan: Plan; live: LiveReadResult }> {
  if (desired.envs.length === 0 && !o.allowEmpty) {
    throw new UsageError('no environment in scope: the configuration defines none, so nothing would be read or changed (an empty or wrong -f?); pass --allow-empty to plan anyway');
  }
  await checkSecretNames(desired, o.baseDir);
  const live = await readLive(conn, desired, Boolean(o.forSaving));
  performance.mark('kms:plan-start');
  const now = o.now ?? new Date();
  const base = buildPlan({
    desired, live, prune: o.prune, now,
    target: { url: conn.url, credential: conn.credential, envs: desired.envs.map((e) => e.projectEnv), projects: desired.projects.map((p) => p.slug) },
  });
  let secrets = new Map<string, SecretStatus>();
  const warnings: string[] = [];
  if (o.secretCheck !== false) {
    const queries = keysToCheck(desired, live.state);
    if (queries.length) {
      const registry = new StoreRegistry({ declarations: desired.stores, baseDir: o.baseDir });
      const checked = await checkSecretPresence(registry, queries);
      secrets = checked.results;
      warnings.push(...checked.warnings);
    }
  }
  const plan = assessKeys({ plan: base, desired, live: live.state, secrets, now, ...(o.force ? { force: o.force } : {}), ...(o.revokeOld ? { revokeOld: true } : {}) });
  plan.warnings.push(...warnings);
  performance.mark('kms:plan-end');
  return { plan, live };
}
