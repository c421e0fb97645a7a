// What an environment holds, as the ownership rules for objects without metadata read it
// (model/ownership.ts `ownershipByContents`, plan/kinds/env.ts and template.ts): its clients and
// endpoints with their metadata. kms-sync's run-lock records are not held objects.
import type { WireClient, WireEndpoint } from '../../api/client.js';
import { address, type JsonObject } from '../../model/index.js';
import type { Holding } from '../../model/ownership.js';
import type { Engine } from '../engine.js';

export interface EnvContents {
  clients: WireClient[];
  endpoints: WireEndpoint[];
  holdings: Holding[];
}

/**
 * The clients and endpoints of an environment. `fresh`: listed again (a create or delete decides
 * on it); else the listings this process read first (a plan's check).
 */
export async function envContents(e: Engine, projectEnv: string, fresh: boolean): Promise<EnvContents> {
  if (fresh) {
    e.forget('client', projectEnv);
    e.forget('endpoint', projectEnv);
  }
  const [clients, endpoints] = await Promise.all([
    fresh ? e.clientsOf(projectEnv) : e.clientOwners(projectEnv),
    fresh ? e.endpointsOf(projectEnv) : e.endpointOwners(projectEnv),
  ]);
  const cs = [...clients.values()];
  const es = [...endpoints.values()].filter((x) => !x.path.startsWith('/__kms-sync/'));
  return {
    clients: cs,
    endpoints: es,
    holdings: [
      ...cs.map((c) => ({
        address: address.client(projectEnv, c.name),
        metadata: c.metadata as JsonObject | undefined,
      })),
      ...es.map((x) => ({
        address: address.endpoint(projectEnv, x.method.toUpperCase(), x.path),
        metadata: x.metadata as JsonObject | undefined,
      })),
    ],
  };
}
