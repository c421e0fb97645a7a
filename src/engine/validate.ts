// `validate`: a configuration checked offline, loaded environment by environment as plan loads it
// (each environment's clients and endpoints read, checked, counted and let go), or whole when only
// a whole load says what is wrong the way it always did (streamedOrWhole). The counts and every
// message are those of a whole load.
import { NotStreamable } from '../config/index.js';
import { mixedStores, noSecretNamesTaken, secretCollisions } from '../secrets/collisions.js';
import { StoreRegistry } from '../secrets/registry.js';
import { checkSecretNames, loadConfig, streamedOrWhole, type GlobalOptions, type PolicyInput } from './run.js';

/** What `validate` reports of a valid configuration (in --env's scope). */
export interface ValidatedCounts {
  files: number;
  projects: number;
  envs: number;
  templates: number;
  clients: number;
  keys: number;
  endpoints: number;
}

/** Checks a configuration offline; environment by environment unless `whole`. Throws what a whole load throws. */
export async function validateConfig(
  o: Pick<GlobalOptions, 'file' | 'env' | 'cdktf' | 'cdktfOut' | 'stack' | 'maxFileSize' | 'maxConfigSize'> &
    PolicyInput,
  whole: boolean,
): Promise<ValidatedCounts> {
  return streamedOrWhole(async (stream) => {
    const { desired, files, baseDir, policy, bodies } = await loadConfig(whole ? o : { ...o, stream });
    const counts = {
      files: files.length,
      projects: desired.projects.length,
      envs: desired.envs.length,
      templates: desired.templates.length,
    };
    if (!bodies) {
      await checkSecretNames(desired, baseDir, policy);
      const keys = desired.clients.reduce((n, c) => n + c.keys.length, 0);
      return { ...counts, clients: desired.clients.length, keys, endpoints: desired.endpoints.length };
    }
    // The secret names as checkSecretNames checks the whole: any problem is said by a whole load.
    const registry = new StoreRegistry({ declarations: desired.stores, baseDir, policy });
    const seen = noSecretNamesTaken();
    let clients = 0;
    let keys = 0;
    let endpoints = 0;
    for (const env of desired.envs) {
      const mine = await bodies.take(env.projectEnv);
      const problems = await secretCollisions({ ...desired, clients: mine.clients }, registry, seen);
      if (problems.length > 0 || mixedStores(seen)) throw new NotStreamable('a secret name needs checking whole');
      clients += mine.clients.length;
      for (const c of mine.clients) keys += c.keys.length;
      endpoints += mine.endpoints.length;
    }
    // The environments out of scope are checked too, as a whole load checks them.
    await bodies.finish();
    return { ...counts, clients, keys, endpoints };
  });
}
