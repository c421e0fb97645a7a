// Endpoints: bulk create (POST /endpoint, array body), update (PUT name/description/metadata),
// replace (request/response cannot change in place: delete, then create), delete. They carry no
// secret, so a lost create is resolved by re-reading and creating what is missing.
import { AmbiguousWriteError } from '../../api/http.js';
import type { EndpointInput } from '../../api/client.js';
import { methodPath, type DesiredEndpoint } from '../../model/index.js';
import { deleteIdempotent, type ApplyContext } from '../context.js';

/** The attributes of an endpoint a write sends. */
export type EndpointFields = Pick<
  DesiredEndpoint,
  'method' | 'path' | 'name' | 'description' | 'request' | 'response' | 'metadata'
>;

export function endpointInput(a: EndpointFields): EndpointInput {
  return {
    method: a.method,
    path: a.path,
    ...(a.name !== undefined ? { name: a.name } : {}),
    ...(a.description !== undefined ? { description: a.description } : {}),
    ...(a.request !== undefined ? { request: a.request } : {}),
    ...(a.response !== undefined ? { response: a.response } : {}),
    metadata: a.metadata ?? {},
  };
}

/** Creates up to BULK_LIMIT endpoints of one environment; returns a note when a lost response was recovered. */
export async function createEndpoints(
  ctx: ApplyContext,
  projectEnv: string,
  items: EndpointFields[],
): Promise<string | undefined> {
  try {
    await ctx.api.createEndpoints(projectEnv, items.map(endpointInput));
    return undefined;
  } catch (e) {
    if (!(e instanceof AmbiguousWriteError)) throw e;
  }
  const live = new Set((await ctx.api.listEndpoints(projectEnv)).map((x) => methodPath(x.method, x.path)));
  const missing = items.filter((a) => !live.has(methodPath(a.method, a.path)));
  if (missing.length) await ctx.api.createEndpoints(projectEnv, missing.map(endpointInput));
  return 'recovered after a lost response';
}

/** Updates the given mutable fields of one endpoint. */
export async function updateEndpoint(
  ctx: ApplyContext,
  projectEnv: string,
  a: EndpointFields,
  fields: ReadonlySet<string>,
): Promise<void> {
  await ctx.api.updateEndpoint(projectEnv, methodPath(a.method, a.path), {
    ...(fields.has('name') && a.name !== undefined ? { name: a.name } : {}),
    ...(fields.has('description') && a.description !== undefined ? { description: a.description } : {}),
    ...(fields.has('metadata') ? { metadata: a.metadata ?? {} } : {}),
  });
}

/** Replaces an endpoint whose request/response changed (its usage stats restart). */
export async function replaceEndpoint(ctx: ApplyContext, projectEnv: string, a: EndpointFields): Promise<void> {
  await deleteEndpoint(ctx, projectEnv, a.method, a.path);
  await createEndpoints(ctx, projectEnv, [a]);
}

export function deleteEndpoint(ctx: ApplyContext, projectEnv: string, method: string, path: string) {
  return deleteIdempotent(() => ctx.api.deleteEndpoint(projectEnv, methodPath(method, path)));
}
