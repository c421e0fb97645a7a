// The path of a raw key, for every front end (DESIGN.md "Keys"): a configuration's secret stores
// and the journaled capture over them (journal, then store, then clear). Its own module: the
// provider loads it with the first key, so a plan or a refresh never loads the store backends.
import { JournaledKeyCapture } from '../apply/journaled-capture.js';
import type { DesiredState, OperatorPolicy } from '../model/index.js';
import type { StateIncarnation } from '../secrets/fsutil.js';
import { StoreRegistry } from '../secrets/registry.js';

export interface KeyPathOptions {
  /** Where the stores' notes go (default: none). */
  notice?: (m: string) => void;
  /** The service target secrets record (session.ts Connection.target). */
  target?: string;
  /** The caller owns the state folder (the agent): see StoreRegistryOptions.incarnation. */
  incarnation?: StateIncarnation;
  /** The variables store URIs and credentials are read from (default: process.env). */
  env?: NodeJS.ProcessEnv;
}

/** The secret stores of a configuration and the key capture path (journal → store) over them. */
export function keyCaptureFor(
  stores: DesiredState['stores'],
  baseDir: string,
  policy: OperatorPolicy,
  o: KeyPathOptions = {},
) {
  const registry = new StoreRegistry({
    declarations: stores,
    baseDir,
    policy,
    ...(o.notice ? { onNotice: o.notice } : {}),
    ...(o.incarnation ? { incarnation: o.incarnation } : {}),
    ...(o.env ? { env: o.env } : {}),
  });
  return { registry, capture: new JournaledKeyCapture(registry, undefined, o.target ? { target: o.target } : {}) };
}
