// Whether the key a secret holds still exists in the live service (`secrets list`, `secrets prune`).
// Only secrets of this service target are judged (model/target.ts, secrets/target-guard.ts): a
// secret of another target, or one that records none (written before targets were), is never
// called gone, and neither is one whose project this credential cannot see.
import { readLiveState } from '../live/read.js';
import { targetMatches, type SecretListing } from '../secrets/store.js';
import type { Connection } from '../engine/run.js';

export type KeyState = { state: 'live' } | { state: 'gone'; why: string } | { state: 'unchecked'; why: string };

export async function keyStates(conn: Connection, items: readonly SecretListing[]): Promise<Map<string, KeyState>> {
  const out = new Map<string, KeyState>();
  const ours = items.filter((i) => {
    const m = i.meta;
    if (!m?.target)
      out.set(i.name, { state: 'unchecked', why: 'records no service (written before targets were recorded)' });
    else if (!targetMatches(m.target, conn.target))
      out.set(i.name, { state: 'unchecked', why: `belongs to another service (${m.target})` });
    else if (!m.projectEnv || !m.client || !m.key)
      out.set(i.name, { state: 'unchecked', why: 'records no key address' });
    else return true;
    return false;
  });
  if (ours.length === 0) return out;
  const projects = await conn.api.listProjects();
  const visible = new Set(projects.map((p) => p.slug));
  const envs = new Set(projects.flatMap((p) => (p.envs?.list ?? []).map((e) => e.project_env)));
  const wanted = [...new Set(ours.map((i) => i.meta!.projectEnv!))].filter((e) => envs.has(e));
  const live = wanted.length
    ? (await readLiveState(conn.api, { projects: [...new Set(wanted.map(projectOf))], envs: wanted })).state
    : undefined;
  for (const i of ours) {
    const { projectEnv, client, key, keyId } = i.meta! as {
      projectEnv: string;
      client: string;
      key: string;
      keyId?: string;
    };
    if (!envs.has(projectEnv)) {
      out.set(
        i.name,
        visible.has(projectOf(projectEnv))
          ? { state: 'gone', why: `environment ${projectEnv} was deleted` }
          : { state: 'unchecked', why: `this credential sees no project of ${projectEnv}` },
      );
      continue;
    }
    const lc = live?.clients.find((c) => c.projectEnv === projectEnv && c.name === client);
    if (!lc) out.set(i.name, { state: 'gone', why: `client ${projectEnv}/${client} was deleted` });
    else if (keyId ? !lc.keys.some((k) => k.id === keyId) : !lc.keys.some((k) => k.name === key))
      out.set(i.name, { state: 'gone', why: `key ${key}${keyId ? ` (${keyId})` : ''} was revoked` });
    else out.set(i.name, { state: 'live' });
  }
  return out;
}

const projectOf = (projectEnv: string) => projectEnv.replace(/-[a-z][a-z0-9]*$/, '');
