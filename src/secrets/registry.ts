// Resolves the stores a configuration names (`stores:` plus the embedded default) to opened
// SecretStore instances, once each, sharing one age identity set.
import path from 'node:path';
import type { StoreDeclaration } from '../model/index.js';
import { AgeKeys } from './age-keys.js';
import { openStore, SecretStoreError, type OpenStoreOptions, type SecretStore } from './store.js';

export const DEFAULT_STORE_NAME = 'default';
/** Beside the configuration, in a hidden folder the config loader never reads. */
export const DEFAULT_STORE_URI = 'sops:.kms-sync/secrets.sops.yaml';

export interface StoreRegistryOptions {
  declarations: StoreDeclaration[];
  /** Directory relative store URIs resolve against (the configuration's). */
  baseDir: string;
  env?: NodeJS.ProcessEnv;
  onNotice?: (message: string) => void;
}

export class StoreRegistry {
  readonly baseDir: string;
  readonly ageKeys: AgeKeys;
  private readonly uris = new Map<string, string>();
  /** Declared `options:` by store URI. */
  private readonly declaredOptions = new Map<string, Record<string, unknown>>();
  private readonly opened = new Map<string, Promise<SecretStore>>();
  private readonly opts: OpenStoreOptions;

  constructor(o: StoreRegistryOptions) {
    this.baseDir = o.baseDir;
    const recipients = o.declarations.flatMap((d) => {
      const r = d.options?.recipients;
      return Array.isArray(r) ? r.filter((x): x is string => typeof x === 'string') : [];
    });
    this.ageKeys = new AgeKeys({ ...(o.env ? { env: o.env } : {}), recipients, ...(o.onNotice ? { onNotice: o.onNotice } : {}) });
    this.opts = { baseDir: o.baseDir, ageKeys: this.ageKeys, ...(o.env ? { env: o.env } : {}) };
    const declaredDefault = o.declarations.find((d) => d.default);
    this.uris.set(DEFAULT_STORE_NAME, declaredDefault?.uri ?? DEFAULT_STORE_URI);
    for (const d of o.declarations) {
      this.uris.set(d.name, d.uri);
      if (d.options) this.declaredOptions.set(d.uri, d.options);
    }
  }

  /** URI of a named store (undefined = the default store). */
  uriOf(name: string | undefined): string {
    const uri = this.uris.get(name ?? DEFAULT_STORE_NAME);
    if (!uri) throw new SecretStoreError(`no secret store named '${name}' is declared under stores:`, { code: 'INVALID_ARGUMENT' });
    return uri;
  }

  /** Opens (once) the store behind a name or a URI. */
  get(nameOrUri: string | undefined): Promise<SecretStore> {
    const uri = this.uris.get(nameOrUri ?? DEFAULT_STORE_NAME) ?? nameOrUri!;
    let p = this.opened.get(uri);
    if (!p) {
      const options = this.declaredOptions.get(uri);
      p = openStore(uri, options ? { ...this.opts, options } : this.opts);
      this.opened.set(uri, p);
    }
    return p;
  }

  /** The default file store lives in the configuration folder: is it tracked by git there? */
  defaultIsLocalFile(): boolean {
    return /^(sops|file):/.test(this.uriOf(undefined));
  }

  journalPath(): string {
    return path.join(this.baseDir, '.kms-sync', 'journal');
  }
}
