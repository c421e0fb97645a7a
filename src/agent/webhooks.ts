// Webhook checks: GitHub signs the body with HMAC-SHA256 and a shared secret
// (X-Hub-Signature-256: sha256=<hex>); GitLab sends its secret token as X-Gitlab-Token. Both are
// compared in constant time; a missing or wrong one is refused (401) before the body is looked at.
import { createHash, createHmac, timingSafeEqual } from 'node:crypto';

const same = (a: string, b: string) => timingSafeEqual(createHash('sha256').update(a).digest(), createHash('sha256').update(b).digest());

export function githubSignatureValid(secret: string, body: Buffer, header: string | undefined): boolean {
  if (!header || !header.startsWith('sha256=')) return false;
  const expected = `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
  return same(expected, header.trim().toLowerCase());
}

export function gitlabTokenValid(token: string, header: string | undefined): boolean {
  return header !== undefined && same(token, header);
}

/** Bearer token, or basic auth whose password is the token (any user name): for the page and the API. */
export function tokenValid(token: string, authorization: string | undefined): boolean {
  if (!authorization) return false;
  const bearer = /^Bearer\s+(.+)$/i.exec(authorization);
  if (bearer) return same(token, bearer[1]!.trim());
  const basic = /^Basic\s+(.+)$/i.exec(authorization);
  if (!basic) return false;
  const decoded = Buffer.from(basic[1]!.trim(), 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon >= 0 && same(token, decoded.slice(colon + 1));
}
