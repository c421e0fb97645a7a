// How the Terraform provider schema (schemas/terraform-provider-kms.json) lines up with the YAML
// format (schemas/kms-sync.schema.json). The synth reader uses it to turn kms_* resources into
// documents of the YAML format; test/cdktf/schema-parity.test.ts checks both schema files against
// it field by field, so the two front ends cannot disagree on a field.

export const PROVIDER_NAME = 'kms';
/** Namespace kms-sync, type kms: what `required_providers` and the filesystem mirror use. */
export const PROVIDER_SOURCE = 'registry.terraform.io/kms-sync/kms';

export type KmsResourceType =
  | 'kms_project'
  | 'kms_environment'
  | 'kms_template'
  | 'kms_client'
  | 'kms_key'
  | 'kms_endpoint';

export type YamlDefinition = 'project' | 'environment' | 'template' | 'client' | 'key' | 'endpoint' | 'store';

export interface ResourceMapping {
  /** The definition of the YAML JSON Schema this resource is one entry of. */
  yaml: YamlDefinition;
  /** Terraform attribute → dotted field path inside that YAML definition (`rotation.window`). */
  fields: Readonly<Record<string, string>>;
  /**
   * Attributes that name the parent (the place of the entry in YAML's nesting), with what they
   * name: a project slug, an environment (`<project>-<type>`) or a client name.
   */
  parents: Readonly<Record<string, 'project' | 'projectEnv' | 'client'>>;
  /** YAML fields that are the child collections of the definition, described by other resources. */
  children: readonly string[];
  /**
   * YAML fields optional in YAML only because a YAML entry may merely reference the parent
   * (another file defines it); a resource always defines, so Terraform requires them.
   */
  definedBy: readonly string[];
  /** Natural identity attributes (import id order). */
  identity: readonly string[];
  /**
   * The YAML field that marks an occurrence as defined elsewhere (`external`): in Terraform, a
   * data source of the same type (`data "kms_project"`), not an attribute of the resource.
   */
  elsewhere?: string;
}

export const RESOURCE_MAPPINGS: Readonly<Record<KmsResourceType, ResourceMapping>> = {
  kms_project: {
    yaml: 'project',
    fields: { slug: 'slug', name: 'name', description: 'description', protected: 'protected' },
    parents: {},
    children: ['environments'],
    definedBy: ['name'],
    identity: ['slug'],
    elsewhere: 'external',
  },
  kms_environment: {
    yaml: 'environment',
    fields: { type: 'type', url: 'url', protected: 'protected' },
    parents: { project: 'project' },
    children: ['templates', 'clients', 'endpoints'],
    definedBy: ['url'],
    identity: ['project', 'type'],
  },
  kms_template: {
    yaml: 'template',
    fields: { name: 'name', rate_limit_day: 'rateLimitDay', max_clients: 'maxClients', protected: 'protected' },
    parents: { project_env: 'projectEnv' },
    children: [],
    definedBy: [],
    identity: ['project_env', 'name'],
  },
  kms_client: {
    yaml: 'client',
    fields: {
      name: 'name',
      template: 'template',
      type: 'type',
      ip_whitelist: 'ipWhitelist',
      metadata: 'metadata',
      protected: 'protected',
    },
    parents: { project_env: 'projectEnv' },
    children: ['keys'],
    definedBy: [],
    identity: ['project_env', 'name'],
  },
  kms_key: {
    yaml: 'key',
    fields: {
      name: 'name',
      ttl: 'ttl',
      expires_at: 'expiresAt',
      auto_rotate: 'autoRotate',
      rotation_window: 'rotation.window',
      rotation_overlap: 'rotation.overlap',
      secret_store: 'secret.store',
      secret_name: 'secret.name',
      protected: 'protected',
    },
    parents: { project_env: 'projectEnv', client: 'client' },
    children: [],
    definedBy: [],
    identity: ['project_env', 'client', 'name'],
  },
  kms_endpoint: {
    yaml: 'endpoint',
    fields: {
      method: 'method',
      path: 'path',
      name: 'name',
      description: 'description',
      request: 'request',
      response: 'response',
      metadata: 'metadata',
      protected: 'protected',
    },
    parents: { project_env: 'projectEnv' },
    children: [],
    definedBy: [],
    identity: ['project_env', 'method', 'path'],
  },
};

export const KMS_RESOURCE_TYPES = Object.keys(RESOURCE_MAPPINGS) as KmsResourceType[];

/** The provider block's `secret_store` blocks are YAML's `stores:` entries. */
export const STORE_BLOCK = 'secret_store';
export const STORE_FIELDS: Readonly<Record<string, string>> = {
  name: 'name',
  uri: 'uri',
  default: 'default',
  options: 'options',
};

/**
 * Provider attributes and the top-level YAML field each one is (undefined: used only by the
 * Terraform provider; kms-sync takes the service URL and key from KMS_API_URL / KMS_API_KEY and
 * resolves relative store URIs against the configuration folder, as with YAML).
 */
export const PROVIDER_FIELDS: Readonly<Record<string, string | undefined>> = {
  url: undefined,
  api_key: undefined,
  owner: 'owner',
  base_dir: undefined,
  /** The CLI's --take-ownership flag: a run's choice, not part of the configuration. */
  take_ownership: undefined,
};

/** `acme-production` → `{ project: 'acme', type: 'production' }` (types have no hyphen). */
export function splitProjectEnv(projectEnv: string): { project: string; type: string } | undefined {
  const m = /^(.+)-([^-]+)$/.exec(projectEnv);
  return m ? { project: m[1]!, type: m[2]! } : undefined;
}
