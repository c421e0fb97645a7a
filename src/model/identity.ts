// Natural-key identities and human-readable addresses (`client.acme-production/globex`).
import type { ResourceKind } from './resources.js';

export const OWNER_MARKER_KEY = 'managed-by';
export const OWNER_MARKER_VALUE = 'kms-sync';

export function projectEnvOf(project: string, type: string): string {
  return `${project}-${type}`;
}

/**
 * Whether `projectEnv` is an environment of `project`. Slugs may hold hyphens but environment
 * types never do, so `a-b-prod` belongs to project `a-b`, never to `a`.
 */
export function isEnvOfProject(projectEnv: string, project: string): boolean {
  return projectEnv.startsWith(`${project}-`) && /^[a-z][a-z0-9]*$/.test(projectEnv.slice(project.length + 1));
}

export function methodPath(method: string, path: string): string {
  return `${method.toUpperCase()}:${path}`;
}

/** Splits `METHOD:/path` at the first colon. */
export function splitMethodPath(mp: string): { method: string; path: string } {
  const i = mp.indexOf(':');
  if (i <= 0) throw new Error(`not a METHOD:/path value: ${JSON.stringify(mp)}`);
  return { method: mp.slice(0, i).toUpperCase(), path: mp.slice(i + 1) };
}

/** Identity tuple → stable string key (also the address suffix). */
export function identityKey(kind: ResourceKind, parts: readonly string[]): string {
  return `${kind}.${parts.join('/')}`;
}

/**
 * identityKey of each kind, written out: no parts array and join per address (a plan of 100,000
 * clients builds some for every client).
 */
export const address = {
  project: (slug: string) => `project.${slug}`,
  env: (projectEnv: string) => `env.${projectEnv}`,
  template: (projectEnv: string, name: string) => `template.${projectEnv}/${name}`,
  client: (projectEnv: string, name: string) => `client.${projectEnv}/${name}`,
  key: (projectEnv: string, client: string, name: string) => `key.${projectEnv}/${client}/${name}`,
  endpoint: (projectEnv: string, method: string, path: string) => `endpoint.${projectEnv}/${methodPath(method, path)}`,
};

/** Default logical secret name of a key: `<project_env>/<client>/<key>`. */
export function defaultSecretName(projectEnv: string, client: string, key: string): string {
  return `${projectEnv}/${client}/${key}`;
}
