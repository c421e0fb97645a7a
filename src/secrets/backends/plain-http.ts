// Store credentials stay home (issue 26): a store's token, access key or signed request is never
// sent over plain HTTP to anything but this machine. A configuration — and so a pull request — can
// declare a store; `vault://host/…?tls=false` or `endpoint=http://host` would otherwise send
// VAULT_TOKEN or a cloud credential in clear to a host the author chose. Checked where the URI is
// parsed, before any request.
import { isIP } from 'node:net';
import { SecretStoreError } from '../errors.js';

/** 127.0.0.0/8, ::1 (also IPv4-mapped) and `localhost` (and its subdomains, RFC 6761). */
export function isLoopbackHost(hostname: string): boolean {
  const h = hostname
    .replace(/^\[|\]$/g, '')
    .toLowerCase()
    .replace(/\.$/, '');
  if (h === 'localhost' || h.endsWith('.localhost')) return true;
  if (isIP(h) === 4) return h.startsWith('127.');
  if (isIP(h) === 6)
    return h === '::1' || /^(0:){5}ffff:127\./.test(h) || /^::ffff:127\./.test(h) || /^::ffff:7f[0-9a-f]{2}:/.test(h);
  return false;
}

/** Throws unless `url` is https, or plain http to a loopback address. `what` names the setting. */
export function refusePlainHttp(url: URL, what: string, store: string): void {
  if (url.protocol !== 'http:' || isLoopbackHost(url.hostname)) return;
  throw new SecretStoreError(
    `secret store ${store}: refusing to send credentials over plain HTTP to ${url.host} (${what}); use https, or a loopback address (127.0.0.1, ::1, localhost) for a local test server. Nothing was sent`,
    { code: 'INVALID_URI' },
  );
}
