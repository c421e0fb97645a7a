// What a configured provider works with: the API client, the secret stores and the key journal
// (the same classes `kms-sync apply` uses), and the listings shared by every ReadResource of the
// process so that a refresh costs one paged listing per environment and kind, not one GET per
// resource.
import { KmsClient } from '../api/client.js';
import type { StoreDeclaration } from '../model/index.js';
import { StoreRegistry } from '../secrets/registry.js';
import { JournaledKeyCapture } from '../apply/journaled-capture.js';

export interface ProviderConfig {
  url: string;
  apiKey: string;
  /** Owner id this configuration marks what it creates with. */
  owner?: string;
  /** Where relative store URIs and the key journal resolve. */
  baseDir: string;
  stores: StoreDeclaration[];
}

export class Engine {
  readonly api: KmsClient;
  readonly stores: StoreRegistry;
  private capture?: JournaledKeyCapture;
  private readonly listings = new Map<string, Promise<unknown>>();

  readonly config: ProviderConfig;

  constructor(config: ProviderConfig, env: NodeJS.ProcessEnv) {
    this.config = config;
    this.api = new KmsClient({ baseUrl: config.url, apiKey: config.apiKey, userAgent: 'terraform-provider-kms/0.1.0' });
    this.stores = new StoreRegistry({ declarations: config.stores, baseDir: config.baseDir, env });
  }

  /** The journal → store path of raw keys, created on first use. */
  keys(): JournaledKeyCapture {
    return (this.capture ??= new JournaledKeyCapture(this.stores));
  }

  /**
   * One listing per (kind, scope) per process, shared by every caller. A failed listing is not
   * kept, so the next caller asks again.
   */
  listing<T>(kind: string, scope: string, load: () => Promise<T>): Promise<T> {
    const key = `${kind}\u0000${scope}`;
    let p = this.listings.get(key) as Promise<T> | undefined;
    if (!p) {
      p = load();
      this.listings.set(key, p);
      p.catch(() => this.listings.delete(key));
    }
    return p;
  }

  /** After a write, later reads of that scope must see it: drop the cached listing. */
  forget(kind: string, scope: string): void {
    this.listings.delete(`${kind}\u0000${scope}`);
  }

  async close(): Promise<void> {
    await this.api.close();
  }
}
