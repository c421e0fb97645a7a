// Who may use which door of the agent's HTTP port. A browser sends some credentials on its own
// (cached basic auth, cookies) with any request a page of another site makes it send, and a page
// whose name an attacker's DNS points at us (DNS rebinding) is "same origin" for the browser. So:
// - writes need `Authorization: Bearer TOKEN` (never basic auth, which a browser replays), a JSON
//   body (a form cannot send one, and a cross-site script cannot without a preflight we never
//   answer), and no sign of another site (`Sec-Fetch-Site`, `Origin`);
// - reads (the page, /api/status, /metrics) take the token as bearer or as the basic-auth
//   password, or are open when --expose names them (always without a token: loopback only);
// - what is answered without the token needs a Host we know (localhost, an IP address, the
//   --listen name, --allowed-host): a rebinding page's Host is its own name.
// /healthz and /readyz are for probes and answer anyone; webhooks prove themselves by signature.
import { createHash, timingSafeEqual } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { isIP } from 'node:net';

/** Reads that --expose can open to callers without the token. */
export type Exposable = 'metrics' | 'status';
export const EXPOSABLE: readonly Exposable[] = ['metrics', 'status'];

export interface AccessPolicy {
  /** The token of the page, the API and /metrics; undefined only on a loopback address. */
  token?: string;
  /** Reads open without the token. */
  expose: ReadonlySet<Exposable>;
  /** Host names (lower case, no port) answered without the token besides localhost and IP addresses. */
  allowedHosts: ReadonlySet<string>;
}

export interface Refusal {
  status: number;
  message: string;
  headers?: Record<string, string>;
}

/** Constant-time comparison of two strings (hashed first, so their lengths leak nothing either). */
export function sameSecret(a: string, b: string): boolean {
  return timingSafeEqual(createHash('sha256').update(a).digest(), createHash('sha256').update(b).digest());
}

const header = (req: IncomingMessage, name: string): string | undefined => {
  const v = req.headers[name];
  return Array.isArray(v) ? v[0] : v;
};

function bearerValid(token: string, authorization: string | undefined): boolean {
  const m = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(authorization ?? '');
  return m !== null && sameSecret(token, m[1]!);
}

function basicValid(token: string, authorization: string | undefined): boolean {
  const m = /^Basic[ \t]+(\S+)[ \t]*$/i.exec(authorization ?? '');
  if (!m) return false;
  const decoded = Buffer.from(m[1]!, 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  return colon >= 0 && sameSecret(token, decoded.slice(colon + 1));
}

/** The host name of a Host header, lower case, without port, brackets or a trailing dot. */
export function hostName(host: string): string {
  const h = host.trim().toLowerCase();
  const name = h.startsWith('[') ? h.slice(1, h.indexOf(']') > 0 ? h.indexOf(']') : undefined) : h.replace(/:\d*$/, '');
  return name.replace(/\.$/, '');
}

/** Whether a request without the token may be answered for this Host: a rebinding page's Host is a name of the attacker's. */
export function hostKnown(policy: AccessPolicy, host: string | undefined): boolean {
  if (host === undefined) return true; // HTTP/1.0 without Host: not a browser
  const name = hostName(host);
  return isIP(name) !== 0 || name === 'localhost' || name.endsWith('.localhost') || policy.allowedHosts.has(name);
}

const unknownHost = (host: string | undefined): Refusal => ({
  status: 403,
  message: `unknown Host ${JSON.stringify(hostName(host ?? ''))}: the agent answers localhost, IP addresses, its --listen name and --allowed-host names (a request with the token is answered under any name)`,
});

/** Why a write (POST /api/…) is refused, or undefined when it may go ahead. */
export function writeRefusal(policy: AccessPolicy, req: IncomingMessage): Refusal | undefined {
  const authorization = header(req, 'authorization');
  const authed = policy.token !== undefined && bearerValid(policy.token, authorization);
  // A browser marks what a page of another site makes it send; the agent's own page is same-origin.
  const site = header(req, 'sec-fetch-site');
  if (site !== undefined && site !== 'same-origin')
    return {
      status: 403,
      message: `cross-site request refused (Sec-Fetch-Site: ${JSON.stringify(site.slice(0, 40))})`,
    };
  const origin = header(req, 'origin');
  if (origin !== undefined && !sameOrigin(origin, header(req, 'host')))
    return { status: 403, message: 'cross-origin request refused (Origin is not this agent)' };
  if (!authed && !hostKnown(policy, header(req, 'host'))) return unknownHost(header(req, 'host'));
  if (policy.token !== undefined && !authed) {
    return {
      status: 401,
      message: /^Basic\s/i.test(authorization ?? '')
        ? 'a write needs Authorization: Bearer TOKEN (basic auth, which a browser sends again on its own, is accepted for reads only)'
        : 'a write needs Authorization: Bearer TOKEN',
      headers: { 'www-authenticate': 'Bearer realm="kms-sync agent"' },
    };
  }
  const type = (header(req, 'content-type') ?? '').split(';')[0]!.trim().toLowerCase();
  if (type !== 'application/json') return { status: 415, message: 'a write needs Content-Type: application/json' };
  return undefined;
}

/** Why a read of `door` is refused, or undefined when it may be answered. */
export function readRefusal(policy: AccessPolicy, req: IncomingMessage, door: Exposable): Refusal | undefined {
  const authorization = header(req, 'authorization');
  if (
    policy.token !== undefined &&
    (bearerValid(policy.token, authorization) || basicValid(policy.token, authorization))
  )
    return undefined;
  if (policy.token !== undefined && !policy.expose.has(door)) {
    return {
      status: 401,
      message: 'unauthorized',
      headers: { 'www-authenticate': 'Basic realm="kms-sync agent", charset="UTF-8"' },
    };
  }
  if (!hostKnown(policy, header(req, 'host'))) return unknownHost(header(req, 'host'));
  return undefined;
}

function sameOrigin(origin: string, host: string | undefined): boolean {
  if (host === undefined) return false;
  try {
    // http, or https where a proxy in front of the agent ends TLS: the same host and port either way.
    const o = new URL(origin);
    return (o.protocol === 'http:' || o.protocol === 'https:') && o.host === new URL(`${o.protocol}//${host}`).host;
  } catch {
    return false; // "null" (a sandboxed frame, a file: page) and anything else that is not a URL
  }
}

/** Whether a --listen host is this machine only. */
export function loopbackHost(host: string): boolean {
  const h = host.toLowerCase();
  return h === 'localhost' || h === '::1' || /^127(\.\d{1,3}){3}$/.test(h) || h === '::ffff:127.0.0.1';
}
