// Configuration files for the benchmark's whole-process scenarios: the desired state of
// fixtures.js written as a user's file would be, YAML in the layout `kms-sync export` writes
// (block mappings, flow ipWhitelist), or JSON. Written as text directly: the 100,000-client file
// (≈ 30 MB) takes a second this way.
import { closeSync, openSync, writeFileSync, writeSync } from 'node:fs';

const q = (s) => (/^[A-Za-z0-9_./-]+$/.test(s) && !/^(true|false|null|~|\d[\d.]*)$/i.test(s) ? s : JSON.stringify(s));

/** The owner id of the benchmark's configurations; the seed stamps it on what it creates. */
export const BENCH_OWNER = 'bench';

/** YAML text of a DesiredState built by fixtures.desiredState (one project, one environment). */
export function yamlOf(state) {
  const out = [
    '# kms-sync benchmark configuration (generated)',
    'apiVersion: kms-sync/v1',
    `owner: ${BENCH_OWNER}`,
    'projects:',
  ];
  const push = (s) => out.push(s);
  for (const p of state.projects) {
    push(`  - slug: ${q(p.slug)}`);
    push(`    name: ${q(p.name)}`);
    push('    environments:');
    for (const e of state.envs.filter((x) => x.project === p.slug)) {
      push(`      - type: ${q(e.type)}`);
      push(`        url: ${e.url}`);
      const templates = state.templates.filter((t) => t.projectEnv === e.projectEnv);
      if (templates.length) {
        push('        templates:');
        for (const t of templates) {
          push(`          - name: ${q(t.name)}`);
          push(`            rateLimitDay: ${t.rateLimitDay}`);
          if (t.maxClients !== undefined) push(`            maxClients: ${t.maxClients}`);
        }
      }
      const clients = state.clients.filter((c) => c.projectEnv === e.projectEnv);
      if (clients.length) {
        push('        clients:');
        for (const c of clients) {
          push(`          - name: ${q(c.name)}`);
          if (c.type) push(`            type: ${q(c.type)}`);
          push(`            template: ${q(c.template)}`);
          if (c.ipWhitelist) push(`            ipWhitelist: [${c.ipWhitelist.join(', ')}]`);
          if (c.metadata) {
            push('            metadata:');
            for (const [k, v] of Object.entries(c.metadata)) push(`              ${q(k)}: ${JSON.stringify(v)}`);
          }
          if (c.keys.length) {
            push('            keys:');
            for (const k of c.keys) push(`              - name: ${q(k.name)}`);
          }
        }
      }
      const endpoints = state.endpoints.filter((x) => x.projectEnv === e.projectEnv);
      if (endpoints.length) {
        push('        endpoints:');
        for (const x of endpoints) {
          push(`          - method: ${x.method}`);
          push(`            path: ${q(x.path)}`);
          if (x.name !== undefined) push(`            name: ${JSON.stringify(x.name)}`);
          if (x.description !== undefined) push(`            description: ${JSON.stringify(x.description)}`);
          for (const f of ['request', 'response', 'metadata'])
            if (x[f]) push(`            ${f}: ${JSON.stringify(x[f])}`);
        }
      }
    }
  }
  return `${out.join('\n')}\n`;
}

/** The same configuration as JSON (generated configurations). */
export function jsonOf(state) {
  const doc = {
    apiVersion: 'kms-sync/v1',
    owner: BENCH_OWNER,
    projects: state.projects.map((p) => ({
      slug: p.slug,
      name: p.name,
      environments: state.envs
        .filter((e) => e.project === p.slug)
        .map((e) => ({
          type: e.type,
          url: e.url,
          templates: state.templates
            .filter((t) => t.projectEnv === e.projectEnv)
            .map(({ name, rateLimitDay, maxClients }) => ({ name, rateLimitDay, maxClients })),
          clients: state.clients
            .filter((c) => c.projectEnv === e.projectEnv)
            .map((c) => ({
              name: c.name,
              type: c.type,
              template: c.template,
              ipWhitelist: c.ipWhitelist,
              metadata: c.metadata,
              keys: c.keys.map((k) => ({ name: k.name })),
            })),
          endpoints: state.endpoints
            .filter((x) => x.projectEnv === e.projectEnv)
            .map(({ method, path, name, description, request, response, metadata }) => ({
              method,
              path,
              name,
              description,
              request,
              response,
              metadata,
            })),
        })),
    })),
  };
  return `${JSON.stringify(doc, null, 2)}\n`;
}

export function writeConfig(file, state) {
  const text = file.endsWith('.json') ? jsonOf(state) : yamlOf(state);
  writeFileSync(file, text);
  return Buffer.byteLength(text);
}

/**
 * A fleet's configuration (scenario 11): `projects` projects of `envsPerProject` environments of
 * `clientsPerEnv` clients each, in the layout `kms-sync export` writes, written environment by
 * environment (a million clients never in memory at once). Returns the bytes written.
 */
export function writeFleetConfig(file, fleet, envState) {
  const fd = openSync(file, 'w');
  let bytes = 0;
  const write = (s) => {
    writeSync(fd, s);
    bytes += Buffer.byteLength(s);
  };
  try {
    write(`# kms-sync benchmark fleet (generated)\napiVersion: kms-sync/v1\nowner: ${BENCH_OWNER}\nprojects:\n`);
    for (let p = 0; p < fleet.projects; p++) {
      const slug = fleetProject(p);
      write(`  - slug: ${slug}\n    name: ${slug}\n    environments:\n`);
      for (let e = 0; e < fleet.envsPerProject; e++) {
        const text = yamlOf(envState(slug, fleetEnvType(e)));
        write(text.slice(text.indexOf('    environments:\n') + '    environments:\n'.length));
      }
    }
  } finally {
    closeSync(fd);
  }
  return bytes;
}

export const fleetProject = (p) => `fleet${String(p).padStart(2, '0')}`;
export const fleetEnvType = (e) => `env${String(e).padStart(2, '0')}`;
