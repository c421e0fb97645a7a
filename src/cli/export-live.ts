// Live state → desired state in the configuration format, so an existing setup can be adopted.
import { withoutMarkers, PROTECTED_MARKER_KEY } from '../model/ownership.js';
import { address, type DesiredState, type LiveState } from '../model/index.js';

export interface ExportNotes {
  skipped: string[];
}

export function liveToDesired(live: LiveState, into: DesiredState, notes: ExportNotes = { skipped: [] }): DesiredState {
  const count = (addrs: string[]) => addrs.reduce((m, a) => m.set(a, (m.get(a) ?? 0) + 1), new Map<string, number>());
  const clientCounts = count(live.clients.map((c) => address.client(c.projectEnv, c.name)));
  for (const p of live.projects)
    into.projects.push({ slug: p.slug, name: p.name, ...(p.description ? { description: p.description } : {}) });
  for (const e of live.envs)
    into.envs.push({ project: e.project, type: e.type, projectEnv: e.projectEnv, url: e.url ?? '' });
  for (const t of live.templates) {
    into.templates.push({
      projectEnv: t.projectEnv,
      name: t.name,
      rateLimitDay: t.rateLimitDay,
      ...(t.maxClients !== undefined ? { maxClients: t.maxClients } : {}),
    });
  }
  for (const c of live.clients) {
    const addr = address.client(c.projectEnv, c.name);
    if ((clientCounts.get(addr) ?? 0) > 1) {
      notes.skipped.push(`${addr}: several live clients share this name`);
      continue;
    }
    if (!c.templateName) {
      notes.skipped.push(`${addr}: its template is unknown`);
      continue;
    }
    const metadata = withoutMarkers(c.metadata);
    const keyNames = new Set<string>();
    into.clients.push({
      projectEnv: c.projectEnv,
      name: c.name,
      ...(c.type ? { type: c.type } : {}),
      template: c.templateName,
      // The live list is shared by the clients that have it (live/read.ts cidrMemo): the configuration gets its own.
      ipWhitelist: [...c.ipWhitelist],
      ...(Object.keys(metadata).length ? { metadata } : {}),
      ...(c.metadata[PROTECTED_MARKER_KEY] === 'true' ? { protected: true } : {}),
      keys: c.keys
        .filter((k) => {
          if (keyNames.has(k.name)) {
            notes.skipped.push(`${address.key(c.projectEnv, c.name, k.name)}: several keys share this name`);
            return false;
          }
          keyNames.add(k.name);
          return true;
        })
        .map((k) => ({
          projectEnv: c.projectEnv,
          client: c.name,
          name: k.name,
          ...(k.expiresAt ? { expiresAt: k.expiresAt } : {}),
          autoRotate: k.autoRotate ?? false,
        })),
    });
  }
  for (const e of live.endpoints) {
    const metadata = withoutMarkers(e.metadata);
    into.endpoints.push({
      projectEnv: e.projectEnv,
      method: e.method,
      path: e.path,
      ...(e.name ? { name: e.name } : {}),
      ...(e.description ? { description: e.description } : {}),
      ...(e.request && Object.keys(e.request).length ? { request: e.request } : {}),
      ...(e.response && Object.keys(e.response).length ? { response: e.response } : {}),
      ...(Object.keys(metadata).length ? { metadata } : {}),
      ...(e.metadata?.[PROTECTED_MARKER_KEY] === 'true' ? { protected: true } : {}),
    });
  }
  return into;
}

/**
 * A project some of whose live environments are not exported is referenced, not defined
 * (`external: true`): planned under the owner of what it names, the export then touches only the
 * environments it holds, never "removes" the project's others (they are not in it).
 * `projectEnvs`: every live environment of each project (LiveReadResult.projectEnvs).
 */
export function referencePartialProjects(
  desired: DesiredState,
  projectEnvs: Record<string, string[]>,
  exported: readonly string[],
): DesiredState {
  const partial = new Set(
    desired.projects.filter((p) => (projectEnvs[p.slug] ?? []).some((pe) => !exported.includes(pe))).map((p) => p.slug),
  );
  if (partial.size === 0) return desired;
  desired.projects = desired.projects.filter((p) => !partial.has(p.slug));
  desired.externalProjects = [...(desired.externalProjects ?? []), ...[...partial].sort().map((slug) => ({ slug }))];
  return desired;
}
