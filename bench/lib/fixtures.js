// Desired (and, for the in-memory diff, live) states that match what the emulator's seed creates.
// The seed is deterministic (src/emulator/service.ts `seed`): templates tpl-000.. with
// rateLimitDay 1000+i and maxClients ceil(clients/templates)+10; clients client-00000.. of type
// company, template i % templates, ipWhitelist [10.0.0.0/8], metadata {...seed metadata, index};
// keys key-0.. (no expiry, autoRotate false); endpoints GET:/r/0000.. named `route i`.
// Everything is built through the model types of src/model/resources.ts.

export const SEED_URL = 'https://api.example.test';
/** Seeded resources carry kms-sync's ownership marker, as if kms-sync had created them. */
export const OWNED = { 'managed-by': 'kms-sync' };

const pad = (n, w) => String(n).padStart(w, '0');
export const templateName = (i) => `tpl-${pad(i, 3)}`;
export const clientName = (i) => `client-${pad(i, 5)}`;
export const endpointPath = (i) => `/r/${pad(i, 4)}`;

/** Body of POST /__emulator/seed for one environment. */
export function seedRequest(s) {
  return {
    project: s.project,
    type: s.type,
    url: SEED_URL,
    templates: s.templates,
    clients: s.clients,
    keysPerClient: s.keysPerClient,
    endpoints: s.endpoints,
    metadata: OWNED,
  };
}

/**
 * The DesiredState that exactly matches a seeded environment (its plan is empty), except for the
 * clients `changed(i)` selects, whose metadata gains `rev: <revision>`.
 * @param {{project: string, type: string, templates: number, clients: number, keysPerClient: number,
 *   endpoints: number, maxClients?: number, changed?: (i: number) => boolean, revision?: string}} s
 */
export function desiredState(s) {
  const projectEnv = `${s.project}-${s.type}`;
  const maxClients = s.maxClients ?? Math.ceil(s.clients / s.templates) + 10;
  const templates = [];
  for (let i = 0; i < s.templates; i++)
    templates.push({ projectEnv, name: templateName(i), rateLimitDay: 1000 + i, maxClients });
  const clients = [];
  for (let i = 0; i < s.clients; i++) {
    const name = clientName(i);
    const keys = [];
    for (let k = 0; k < s.keysPerClient; k++) keys.push({ projectEnv, client: name, name: `key-${k}` });
    const metadata = { index: String(i) };
    if (s.changed?.(i)) metadata.rev = s.revision ?? 'changed';
    clients.push({
      projectEnv,
      name,
      type: 'company',
      template: templateName(i % s.templates),
      ipWhitelist: ['10.0.0.0/8'],
      metadata,
      keys,
    });
  }
  const endpoints = [];
  for (let i = 0; i < s.endpoints; i++) {
    endpoints.push({
      projectEnv,
      method: 'GET',
      path: endpointPath(i),
      name: `route ${i}`,
      description: '',
      request: {},
      response: {},
      metadata: {},
    });
  }
  return {
    projects: [{ slug: s.project, name: s.project }],
    envs: [{ project: s.project, type: s.type, projectEnv, url: SEED_URL }],
    templates,
    clients,
    endpoints,
    stores: [],
  };
}

/** A LiveReadResult as the reader would produce it for a seeded environment (scenario 5: no HTTP). */
export function liveReadResult(s) {
  const projectEnv = `${s.project}-${s.type}`;
  const maxClients = Math.ceil(s.clients / s.templates) + 10;
  const hex = (n, w) => n.toString(16).padStart(w, '0');
  const uuid = (kind, n) => `${hex(kind, 8)}-0000-4000-8000-${hex(n, 12)}`;
  const createdAt = '2026-11-22T00:00:00.000Z';
  const templates = [];
  for (let i = 0; i < s.templates; i++)
    templates.push({ id: uuid(1, i), projectEnv, name: templateName(i), rateLimitDay: 1000 + i, maxClients });
  const clients = [];
  for (let i = 0; i < s.clients; i++) {
    const keys = [];
    for (let k = 0; k < s.keysPerClient; k++)
      keys.push({ id: uuid(3, i * 16 + k), name: `key-${k}`, expiresAt: null, autoRotate: false, createdAt });
    const t = i % s.templates;
    clients.push({
      id: uuid(2, i),
      projectEnv,
      name: clientName(i),
      type: 'company',
      templateId: uuid(1, t),
      templateName: templateName(t),
      ipWhitelist: ['10.0.0.0/8'],
      metadata: { ...OWNED, index: String(i) },
      keys,
    });
  }
  const endpoints = [];
  for (let i = 0; i < s.endpoints; i++) {
    endpoints.push({
      projectEnv,
      method: 'GET',
      path: endpointPath(i),
      name: `route ${i}`,
      description: '',
      request: {},
      response: {},
      metadata: { ...OWNED },
    });
  }
  return {
    state: {
      projects: [{ slug: s.project, name: s.project, description: '' }],
      envs: [{ id: uuid(0, 0), project: s.project, projectEnv, type: s.type, url: SEED_URL }],
      templates,
      clients,
      endpoints,
    },
    duplicates: [],
    fingerprints: {},
  };
}
