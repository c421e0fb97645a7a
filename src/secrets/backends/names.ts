/**
 * Name rules shared by the remote backends: logical secret names (`<project_env>/<client>/<key>`,
 * or any `/`-separated name a key's `secret.name` gives) → backend-legal names.
 *
 * Every mapping here is deterministic and collision-free:
 *  - a *lossless* form is used when every segment already fits the backend's alphabet; it can be
 *    decoded back, so two different logical names never share it;
 *  - otherwise a *lossy* form is used: the sanitised segments plus a marker and a short hash of the
 *    whole logical name. The marker is a character sequence the lossless form can never contain,
 *    so a lossy name never equals a lossless one; two lossy names only meet if 40 bits of SHA-256
 *    of two different logical names are equal.
 */
import { createHash } from 'node:crypto';
import { SecretStoreError } from '../errors.js';

/** Splits a logical name into its non-empty `/` segments (throws on an empty one). */
export function logicalSegments(logical: string): string[] {
  if (typeof logical !== 'string' || logical === '') {
    throw new SecretStoreError('invalid logical secret name: empty', { code: 'INVALID_ARGUMENT' });
  }
  const segs = logical.split('/');
  if (segs.some((s) => s === '')) {
    throw new SecretStoreError(`invalid logical secret name '${logical}': empty segment`, { code: 'INVALID_ARGUMENT' });
  }
  if (/[\u0000-\u001f\u007f]/.test(logical)) {
    throw new SecretStoreError('invalid logical secret name: control characters', { code: 'INVALID_ARGUMENT' });
  }
  return segs;
}

const BASE32 = 'abcdefghijklmnopqrstuvwxyz234567';

/** 8 base32 characters (40 bits) of SHA-256 of the logical name, lower case. */
export function shortHash(logical: string): string {
  const digest = createHash('sha256').update(logical, 'utf8').digest();
  let bits = 0;
  let acc = 0;
  let out = '';
  for (const byte of digest) {
    acc = (acc << 8) | byte;
    bits += 8;
    while (bits >= 5 && out.length < 8) {
      out += BASE32[(acc >>> (bits - 5)) & 31];
      bits -= 5;
    }
    if (out.length >= 8) break;
    acc &= 0xff;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Environment-variable style names (GitHub Actions secrets, GitLab CI/CD variables)

export interface EnvNameRules {
  /** Upper-case names that must not begin the result, e.g. `GITHUB_` (also: no leading digit). */
  reservedPrefixes: readonly string[];
  /** Constant prefix of every name of the store (already validated, upper case). */
  prefix?: string;
  /** Longest legal name. */
  maxLength: number;
}

/** A segment written losslessly: lower-case letters and digits, single hyphens inside. */
const ENV_LOSSLESS_SEGMENT = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;

/**
 * `acme-production/globex/primary` → `ACME_PRODUCTION__GLOBEX__PRIMARY`: upper case, `-` → `_`,
 * segments joined by `__`. That form never holds `___`. Any other input (upper case, `_`, `.`,
 * non-ASCII, `--`, a leading digit or a reserved prefix) becomes
 * `<SANITISED__SEGMENTS>___<HASH>`, e.g. `ACME_PROD__WEB_APP__PRIMARY___K3D9XQ2A`.
 */
export function envStyleName(logical: string, rules: EnvNameRules): string {
  const segs = logicalSegments(logical);
  const prefix = rules.prefix ?? '';
  const illegalStart = (name: string): boolean =>
    /^[0-9]/.test(name) || rules.reservedPrefixes.some((p) => name.startsWith(p));
  if (segs.every((s) => ENV_LOSSLESS_SEGMENT.test(s))) {
    const name = prefix + segs.map((s) => s.toUpperCase().replaceAll('-', '_')).join('__');
    if (!illegalStart(name) && name.length <= rules.maxLength) return name;
  }
  const hash = shortHash(logical).toUpperCase();
  const body0 = segs
    .map((s) => {
      const t = s
        .normalize('NFKD')
        .toUpperCase()
        .replace(/[^A-Z0-9]+/g, '_')
        .replace(/^_+|_+$/g, '');
      return t === '' ? 'X' : t;
    })
    .join('__');
  let body = illegalStart(prefix + body0) ? `K_${body0}` : body0;
  const room = rules.maxLength - prefix.length - 3 - hash.length;
  if (body.length > room) body = body.slice(0, Math.max(1, room)).replace(/_+$/, '') || 'K';
  return `${prefix}${body}___${hash}`;
}

// ---------------------------------------------------------------------------------------------
// Kubernetes

/** DNS-1123 label body: lower-case letters and digits, single hyphens inside. */
const DNS_LOSSLESS_SEGMENT = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
export const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
export const DNS1123_MAX = 253;

/**
 * A Secret name (DNS-1123 subdomain, ≤ 253): `acme-prod/web/primary` → `acme-prod.web.primary`;
 * anything else → `<sanitised.segments>--<hash>` (the lossless form never holds `--`).
 */
export function dnsSubdomainName(logical: string, prefix = ''): string {
  const segs = logicalSegments(logical);
  if (segs.every((s) => DNS_LOSSLESS_SEGMENT.test(s))) {
    const name = prefix + segs.join('.');
    if (name.length <= DNS1123_MAX && DNS1123_SUBDOMAIN.test(name)) return name;
  }
  const hash = shortHash(logical);
  let body = segs
    .map((s) => {
      const t = s
        .normalize('NFKD')
        .toLowerCase()
        .replace(/[^a-z0-9]+/g, '-')
        .replace(/^-+|-+$/g, '');
      return t === '' ? 'x' : t;
    })
    .join('.');
  const room = DNS1123_MAX - prefix.length - 2 - hash.length;
  if (body.length > room) body = body.slice(0, room).replace(/[-.]+$/, '') || 'x';
  return `${prefix}${body}--${hash}`;
}

/** A Secret data key: `[-._a-zA-Z0-9]+`, ≤ 253, not `.`/`..`, not starting with `..`. */
export const DATA_KEY_RE = /^[-._a-zA-Z0-9]+$/;
const DATA_LOSSLESS_SEGMENT = /^[-_a-zA-Z0-9]+$/;

/**
 * A data key inside one Secret: `acme-prod/web/primary` → `acme-prod.web.primary` (segments of
 * `[-_a-zA-Z0-9]`, joined by `.`); anything else → `<sanitised.segments>..<hash>` (the lossless
 * form never holds `..`).
 */
export function dataKeyName(logical: string): string {
  const segs = logicalSegments(logical);
  if (segs.every((s) => DATA_LOSSLESS_SEGMENT.test(s))) {
    const name = segs.join('.');
    if (name.length <= DNS1123_MAX) return name;
  }
  const hash = shortHash(logical);
  let body = segs
    .map((s) => {
      const t = s
        .normalize('NFKD')
        .replace(/[^-_a-zA-Z0-9]+/g, '_')
        .replace(/^_+|_+$/g, '');
      return t === '' ? 'x' : t;
    })
    .join('.');
  const room = DNS1123_MAX - 2 - hash.length;
  if (body.length > room) body = body.slice(0, room).replace(/\.+$/, '') || 'x';
  return `${body}..${hash}`;
}

export function isLegalDataKey(name: string): boolean {
  return (
    name.length <= DNS1123_MAX && DATA_KEY_RE.test(name) && name !== '.' && name !== '..' && !name.startsWith('..')
  );
}

// ---------------------------------------------------------------------------------------------
// Vault paths

const VAULT_SAFE = /[A-Za-z0-9._-]/;

/**
 * Vault / OpenBao path: segments keep `[A-Za-z0-9._-]`, every other character is percent-encoded
 * (UTF-8, upper-case hex, `%` itself included), a segment of dots only is encoded whole: injective.
 */
export function vaultPathName(logical: string): string {
  return logicalSegments(logical)
    .map((seg) => {
      if (/^\.+$/.test(seg)) return percentEncodeAll(seg);
      return Array.from(seg)
        .map((ch) => (VAULT_SAFE.test(ch) ? ch : percentEncodeAll(ch)))
        .join('');
    })
    .join('/');
}

function percentEncodeAll(s: string): string {
  return Array.from(Buffer.from(s, 'utf8'))
    .map((b) => `%${b.toString(16).toUpperCase().padStart(2, '0')}`)
    .join('');
}
