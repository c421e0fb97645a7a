// A client of a running agent's HTTP API, for `kms-sync agent status|reconcile|suspend|resume`
// (Flux's `flux get` / `flux reconcile` / `flux suspend` / `flux resume`). Every request carries
// the token as a bearer header (the agent's write door wants it so, and it opens its read doors
// too) and every write is JSON, as access.ts requires of any caller.
import type { AgentStatus, ReconcileRecord } from './status.js';

export class AgentRemoteError extends Error {
  /** The HTTP status the agent answered, when it answered. */
  readonly status: number | undefined;
  constructor(message: string, status?: number) {
    super(message);
    this.status = status;
  }
}

export interface RemoteOptions {
  /** The agent's base URL (http://agent:8080). */
  url: string;
  /** The agent's token (--ui-token of the agent), when it has one. */
  token?: string;
  /** Longest one request may take (default 30 s). */
  requestTimeoutMs?: number;
}

/** What POST /api/reconcile answers: accepted (with the agent's clock at the request), or suspended. */
export interface ReconcileRequested {
  reconcile: 'accepted' | 'suspended';
  requestedAt?: string;
  syncWindowOverride?: boolean;
}

export class AgentRemote {
  private readonly base: URL;
  private readonly o: RemoteOptions;

  constructor(o: RemoteOptions) {
    let base: URL;
    try {
      base = new URL(o.url);
    } catch {
      throw new AgentRemoteError(
        `--url ${JSON.stringify(o.url)}: expected the agent's address, e.g. http://127.0.0.1:8080`,
      );
    }
    if (!/^https?:$/.test(base.protocol) || base.username || base.password) {
      throw new AgentRemoteError(
        `--url ${JSON.stringify(o.url)}: expected an http:// or https:// address without user info (the token goes in --token file:PATH or KMS_SYNC_UI_TOKEN)`,
      );
    }
    this.base = base;
    this.o = o;
  }

  /** The address as shown in messages (no query or fragment). */
  get shown(): string {
    return `${this.base.origin}${this.base.pathname.replace(/\/+$/, '')}`;
  }

  private async call(method: 'GET' | 'POST', route: string, body?: unknown): Promise<unknown> {
    const url = new URL(route.replace(/^\//, ''), `${this.shown}/`);
    const headers: Record<string, string> = { accept: 'application/json' };
    if (this.o.token !== undefined) headers.authorization = `Bearer ${this.o.token}`;
    if (method === 'POST') headers['content-type'] = 'application/json';
    let res: Response;
    try {
      res = await fetch(url, {
        method,
        headers,
        redirect: 'error',
        signal: AbortSignal.timeout(this.o.requestTimeoutMs ?? 30_000),
        ...(method === 'POST' ? { body: JSON.stringify(body ?? {}) } : {}),
      });
    } catch (e) {
      const cause = (e as { cause?: { code?: string; message?: string } }).cause;
      const why =
        (e as Error).name === 'TimeoutError'
          ? `no answer within ${(this.o.requestTimeoutMs ?? 30_000) / 1000} s`
          : (cause?.code ?? cause?.message ?? (e as Error).message);
      throw new AgentRemoteError(
        `cannot reach the agent at ${this.shown} (${why}): is it running, and is --url its --listen address?`,
      );
    }
    const text = await res.text();
    if (res.status === 401)
      throw new AgentRemoteError(
        `the agent at ${this.shown} wants its token (401): give it with --token file:PATH or env:NAME, or KMS_SYNC_UI_TOKEN${this.o.token !== undefined ? ' (the one given was refused)' : ''}`,
        401,
      );
    if (res.status === 409 || res.status === 202 || res.ok) {
      try {
        return JSON.parse(text) as unknown;
      } catch {
        throw new AgentRemoteError(
          `the agent at ${this.shown} answered ${method} ${route} with something other than JSON (HTTP ${res.status}): is --url a kms-sync agent?`,
          res.status,
        );
      }
    }
    throw new AgentRemoteError(
      `the agent at ${this.shown} refused ${method} ${route} (HTTP ${res.status}): ${text.trim().slice(0, 500)}`,
      res.status,
    );
  }

  async status(): Promise<AgentStatus> {
    const s = (await this.call('GET', '/api/status')) as AgentStatus;
    if (typeof s !== 'object' || s === null || typeof s.agent !== 'object' || typeof s.condition !== 'object') {
      throw new AgentRemoteError(
        `the agent at ${this.shown} answered /api/status with something that is not a kms-sync agent's status`,
      );
    }
    return s;
  }

  async reconcile(o: { overrideSyncWindow?: boolean } = {}): Promise<ReconcileRequested> {
    return (await this.call(
      'POST',
      '/api/reconcile',
      o.overrideSyncWindow ? { overrideSyncWindow: true } : {},
    )) as ReconcileRequested;
  }

  async suspend(): Promise<{ suspended: boolean }> {
    return (await this.call('POST', '/api/suspend')) as { suspended: boolean };
  }

  async resume(): Promise<{ suspended: boolean }> {
    return (await this.call('POST', '/api/resume')) as { suspended: boolean };
  }

  /**
   * A reconcile that started at or after `requestedAt` (the agent's own clock, so a skew between
   * the two machines does not matter), once it finished: the agent's last reconcile (the history
   * folds repeats and keeps earlier starts' rows, so it is not searched); polls /api/status.
   */
  async waitForReconcile(
    requestedAt: string,
    o: { timeoutMs: number; pollMs?: number; onWait?: () => void },
  ): Promise<{ record: ReconcileRecord; status: AgentStatus }> {
    const end = Date.now() + o.timeoutMs;
    for (;;) {
      const status = await this.status();
      const record = status.lastReconcile;
      if (record && record.startedAt >= requestedAt && record.finishedAt) return { record, status };
      if (status.agent.suspended)
        throw new AgentRemoteError(
          `the agent at ${this.shown} was suspended before it reconciled (kms-sync agent resume)`,
        );
      if (Date.now() >= end)
        throw new AgentRemoteError(
          `the agent at ${this.shown} accepted the request but has not finished a reconcile within ${Math.round(o.timeoutMs / 1000)} s (--timeout); it keeps going: see kms-sync agent status`,
        );
      o.onWait?.();
      await new Promise((r) => setTimeout(r, o.pollMs ?? 500));
    }
  }
}
