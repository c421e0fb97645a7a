// Webhook checks: GitHub signs the body with HMAC-SHA256 and a shared secret
// (X-Hub-Signature-256: sha256=<hex>); GitLab sends its secret token as X-Gitlab-Token. Both are
// compared in constant time; a missing or malformed header is refused (401) before any of the
// body is read, and a delivery seen before (its id, or the same signed body again) is ignored.
import { createHash, createHmac } from 'node:crypto';
import { sameSecret } from './access.js';

/** `sha256=` and 64 hex digits: anything else is refused before the body is read. */
export function githubSignatureWellFormed(header: string | undefined): boolean {
  return header !== undefined && /^sha256=[0-9a-f]{64}$/i.test(header.trim());
}

export function githubSignatureValid(secret: string, body: Buffer, header: string | undefined): boolean {
  if (!githubSignatureWellFormed(header)) return false;
  const expected = `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
  return sameSecret(expected, header!.trim().toLowerCase());
}

export function gitlabTokenValid(token: string, header: string | undefined): boolean {
  return header !== undefined && sameSecret(token, header);
}

/**
 * Deliveries already acted on, newest last, at most `max`: by the sender's delivery id
 * (X-GitHub-Delivery; GitLab's Idempotency-Key or X-Gitlab-Event-UUID) and by the digest of the
 * body, since the id is not covered by GitHub's signature and a replay can carry a fresh one.
 */
export class RecentDeliveries {
  private readonly seen = new Set<string>();
  private readonly max: number;
  constructor(max = 1000) {
    this.max = max;
  }

  /** True when this delivery was seen before; otherwise remembers it. */
  replayed(provider: string, id: string | undefined, body: Buffer): boolean {
    const keys = [
      `${provider} body ${createHash('sha256').update(body).digest('hex')}`,
      ...(id ? [`${provider} id ${id}`] : []),
    ];
    if (keys.some((k) => this.seen.has(k))) return true;
    for (const k of keys) {
      this.seen.add(k);
      if (this.seen.size > this.max) this.seen.delete(this.seen.values().next().value!);
    }
    return false;
  }
}
