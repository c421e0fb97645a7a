// What every per-kind handler needs to act on the service: the API client, the key capture path
// (journal → store), a clock, and the template ids of each environment (looked up once). The
// reconciler's scheduler and the Terraform provider build one each and call the same handlers.
import { ApiError } from '../api/http.js';
import type { KmsClient, WireProject } from '../api/client.js';
import type { KeyCapture, StoredKeyReceipt } from './key-capture.js';

export interface ApplyContext {
  api: KmsClient;
  keys: KeyCapture;
  now: () => Date;
  templates: TemplateIds;
  /**
   * Called before every key-issuing request: flushes the journal and checks the stores once,
   * and throws when no key may be issued any more (a store write failed, or an interrupt).
   */
  beforeIssue: () => Promise<void>;
  /** Store writes that run behind the journal; the caller awaits them (end of a phase, end of an apply). */
  track: (stored: Promise<StoredKeyReceipt[]>) => void;
  /** A note on a recovery (a lost response re-read, orphans revoked), for the run's report. */
  recovered: (note: string) => void;
}

/** Template name → id per environment, from responses and, when unknown, one list call each. */
export class TemplateIds {
  private readonly ids = new Map<string, Map<string, string>>();
  private readonly listings = new Map<string, Promise<void>>();
  private readonly api: KmsClient;

  constructor(api: KmsClient) {
    this.api = api;
  }

  remember(project: WireProject): void {
    for (const e of project.envs?.list ?? []) {
      if (!e.templates) continue;
      const m = this.ids.get(e.project_env) ?? new Map<string, string>();
      for (const t of e.templates) m.set(t.name, t.id);
      this.ids.set(e.project_env, m);
    }
  }

  async id(projectEnv: string, name: string): Promise<string> {
    if (!this.ids.get(projectEnv)?.has(name)) {
      let listing = this.listings.get(projectEnv);
      if (!listing) {
        listing = this.api.listTemplates(projectEnv).then((list) => {
          const m = this.ids.get(projectEnv) ?? new Map<string, string>();
          for (const t of list) m.set(t.name, t.id);
          this.ids.set(projectEnv, m);
        });
        this.listings.set(projectEnv, listing);
        // A failed listing is not cached: the next caller asks again.
        listing.catch(() => this.listings.delete(projectEnv));
      }
      await listing;
    }
    const id = this.ids.get(projectEnv)?.get(name);
    if (!id) throw new Error(`template '${name}' not found in ${projectEnv}`);
    return id;
  }
}

/**
 * Deletes are idempotent: a 404 means the resource is already gone (its first delete may have
 * committed with the response lost, or someone removed it since the plan), which is the goal.
 */
export async function deleteIdempotent(send: () => Promise<unknown>): Promise<'deleted' | 'already gone'> {
  try {
    await send();
    return 'deleted';
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return 'already gone';
    throw e;
  }
}

export const errorText = (e: unknown) => (e instanceof Error ? e.message : String(e));
