// The one desired-state model every front end (YAML, CDKTF) produces, and the live model the
// reader fills. Identities are natural keys (DESIGN.md "Identities"); live UUIDs never appear in
// desired state.
import { createHash } from 'node:crypto';

/** Where a desired resource was declared: used in every error and duplicate report. */
export interface SourceLocation {
  file: string;
  line: number;
  column: number;
  /** JSON-pointer-like field path inside the file, e.g. `projects[0].environments[1].clients[2]`. */
  path: string;
}

export type ResourceKind = 'project' | 'env' | 'template' | 'client' | 'key' | 'endpoint';

/** Apply order of creates; deletes run in reverse. */
export const KIND_ORDER: readonly ResourceKind[] = ['project', 'env', 'template', 'client', 'key', 'endpoint'];

export type JsonValue = string | number | boolean | null | JsonValue[] | { [k: string]: JsonValue };
export type JsonObject = { [k: string]: JsonValue };

export interface SecretTarget {
  /** Name of a store declared under `stores:` (default: the default store). */
  store?: string;
  /** Secret name/path override; default `<project_env>/<client>/<key>` adapted to the backend. */
  name?: string;
}

interface DesiredBase {
  protected?: boolean;
  source?: SourceLocation;
}

export interface DesiredProject extends DesiredBase {
  slug: string;
  name: string;
  description?: string;
}

/**
 * A project this configuration names but does not define (`external: true`): defined elsewhere
 * (another configuration, the dashboard). kms-sync never creates, renames or deletes it, and only
 * the environments the configuration names are in scope (none of its others "left").
 */
export interface ExternalProject {
  slug: string;
  /** The first occurrence marked external. */
  source?: SourceLocation;
}

export interface DesiredEnv extends DesiredBase {
  project: string;
  type: string;
  /** `<project>-<type>` */
  projectEnv: string;
  url: string;
}

export interface DesiredTemplate extends DesiredBase {
  projectEnv: string;
  name: string;
  rateLimitDay: number;
  maxClients?: number;
}

export interface DesiredKey extends DesiredBase {
  projectEnv: string;
  client: string;
  name: string;
  /** Absolute expiry (normalised ISO 8601 UTC). Mutually exclusive with ttl. */
  expiresAt?: string;
  /** Relative lifetime such as `90d`, `12h`; expiry is computed when the key is issued. */
  ttl?: string;
  autoRotate?: boolean;
  /** Rotation window (rotate when expiring within it) and overlap of old and new key. */
  rotation?: { window?: string; overlap?: string };
  secret?: SecretTarget;
}

export interface DesiredClient extends DesiredBase {
  projectEnv: string;
  name: string;
  type?: string;
  /** Template referenced by name within the same environment. */
  template: string;
  ipWhitelist?: readonly string[];
  metadata?: JsonObject;
  keys: DesiredKey[];
}

export interface DesiredEndpoint extends DesiredBase {
  projectEnv: string;
  method: string;
  path: string;
  name?: string;
  description?: string;
  request?: JsonObject;
  response?: JsonObject;
  metadata?: JsonObject;
}

export interface StoreDeclaration {
  name: string;
  uri: string;
  /** Extra options passed to the backend (recipients, namespace, ...). */
  options?: JsonObject;
  default?: boolean;
  source?: SourceLocation;
}

/**
 * What a configuration asks for. Each identity appears once: the builder (config/load.ts) refuses a
 * second template, client or endpoint of one name in an environment and a second key of one name
 * in a client (the secret-name check relies on it: secrets/collisions.ts).
 */
export interface DesiredState {
  projects: DesiredProject[];
  /** Projects referenced with `external: true` (never in `projects`): only their named environments are in scope. */
  externalProjects?: ExternalProject[];
  envs: DesiredEnv[];
  templates: DesiredTemplate[];
  clients: DesiredClient[];
  /** Endpoints in scope; keys live inside clients. */
  endpoints: DesiredEndpoint[];
  stores: StoreDeclaration[];
  /** Variables the configuration read with `${env:}` (names only, sorted): shown in the plan's security section. */
  envReferences?: string[];
  /** Owner id of this configuration (issue 11): what it creates carries it; derived when absent. */
  owner?: string;
  /** `settings:`: how kms-sync runs with this configuration (not resources of the service). */
  settings?: ConfigSettings;
}

export interface ConfigSettings {
  /** In CI, allow issuing keys into a local store file (the workflow commits and pushes it): cli/ci-guard.ts. */
  allowLocalStoreInCi?: boolean;
}

export function emptyDesiredState(): DesiredState {
  return { projects: [], envs: [], templates: [], clients: [], endpoints: [], stores: [] };
}

// ---------------------------------------------------------------- live state

export interface LiveProject {
  slug: string;
  name: string;
  description?: string;
}

export interface LiveEnv {
  id: string;
  project: string;
  projectEnv: string;
  type: string;
  url?: string;
}

/**
 * A template's client maximum when `maxClients` is not sent on create: the service's default
 * (docs/contract-decisions.md). Plans count clients against it; the emulator applies it.
 */
export const SERVICE_DEFAULT_MAX_CLIENTS = 100;

export interface LiveTemplate {
  id: string;
  projectEnv: string;
  name: string;
  rateLimitDay: number;
  maxClients?: number;
}

export interface LiveKey {
  id: string;
  name: string;
  expiresAt?: string | null;
  autoRotate?: boolean;
  createdAt?: string;
}

export interface LiveClient {
  id: string;
  projectEnv: string;
  name: string;
  type?: string;
  templateId?: string | null;
  /** Name of the template `templateId` points at, resolved by the reader. */
  templateName?: string;
  ipWhitelist: readonly string[];
  metadata: JsonObject;
  keys: LiveKey[];
  /**
   * The inventory of the configuration being planned holds this client (it created or claimed
   * it): ours even when someone removed its ownership markers (set by the engine from the inventory; never sent to the service).
   */
  held?: boolean;
}

export interface LiveEndpoint {
  projectEnv: string;
  method: string;
  path: string;
  name?: string;
  description?: string;
  request?: JsonObject;
  response?: JsonObject;
  metadata?: JsonObject;
  /** The inventory of the configuration being planned holds this endpoint (see LiveClient.held). */
  held?: boolean;
}

/** Live state of the environments in scope. Absent envs are simply not in `envs`. */
export interface LiveState {
  projects: LiveProject[];
  envs: LiveEnv[];
  templates: LiveTemplate[];
  clients: LiveClient[];
  endpoints: LiveEndpoint[];
  /**
   * kms-sync's own records found in the environments' endpoint lists (`/__kms-sync/inventory/…`:
   * the inventories applies keep in the service, engine/inventory.ts), hidden from `endpoints`.
   */
  records?: LiveRecord[];
}

/** Where kms-sync keeps a configuration's inventory in an environment (engine/inventory.ts). */
export const INVENTORY_RECORD_PREFIX = '/__kms-sync/inventory/';

/** The short id of an owner in kms-sync's record paths (the run lock's, the inventory's): a hash, since an owner id may hold any character. */
export const ownerRecordId = (owner: string) => createHash('sha256').update(owner).digest('hex').slice(0, 16);

/** One of kms-sync's own records in an environment (an endpoint under `/__kms-sync/`). */
export interface LiveRecord {
  projectEnv: string;
  path: string;
  metadata?: JsonObject;
}

export function emptyLiveState(): LiveState {
  return { projects: [], envs: [], templates: [], clients: [], endpoints: [] };
}
