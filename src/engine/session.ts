// The connection every front end opens to the service: the CLI and the agent (run.ts connect,
// from KMS_API_URL / --url and KMS_API_KEY) and the Terraform provider (provider/engine.ts, from
// its provider block). One place builds the API client and names the service target that secrets
// record (model/target.ts), so a key the provider issued and one `apply` issued are held alike.
import { KmsClient } from '../api/client.js';
import type { HttpOptions } from '../api/http.js';
import { credentialKind, serviceTarget } from '../model/index.js';
import type { Plan } from '../plan/types.js';
import { inventorySealKey } from './inventory.js';

export interface Connection {
  api: KmsClient;
  url: string;
  credential: Plan['target']['credential'];
  /** Which service this is (model/target.ts): secrets record it, and no target replaces another's. */
  target: string;
  /** Seals the CLI's local inventory (engine/inventory.ts): derived from the credential, which a pull request author does not hold. */
  sealKey: Buffer;
}

/** The API client and service target of `url` with `apiKey` (checked by the caller). */
export function openConnection(
  o: Pick<HttpOptions, 'parallelism' | 'maxRps' | 'onRetry'> & { url: string; apiKey: string; userAgent: string },
  env: NodeJS.ProcessEnv,
): Connection {
  const { url, apiKey, ...rest } = o;
  const api = new KmsClient({ baseUrl: url, apiKey, ...rest });
  const credential = credentialKind(apiKey);
  return { api, url, credential, target: serviceTarget(url, credential, env), sealKey: inventorySealKey(apiKey) };
}
