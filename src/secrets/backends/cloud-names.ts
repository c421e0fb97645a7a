/**
 * Helpers shared by the cloud secret-store backends (aws-sm:, gcp-sm:, azure-kv:): URI parsing,
 * deterministic backend-legal secret names, metadata <-> tags, idempotency tokens, value-free
 * error text, and the sequential `putMany` that reports exactly which entries did not land.
 *
 * Nothing here ever puts a secret value into a message: messages are built from names, codes and
 * SDK error names; SDK messages are redacted and shortened before they are quoted.
 */
import { createHash } from 'node:crypto';
import { SecretStoreError, redactSecrets, type SecretStoreErrorCode } from '../errors.js';
import { targetTag, type SecretEntry, type SecretMetadata } from '../store.js';
import { refusePlainHttp } from './plain-http.js';
import { redactUserinfo } from '../../model/redact.js';

// ---------------------------------------------------------------------------------------------
// URIs

export interface CloudUri {
  scheme: string;
  /** The part between `//` and the first `/` (region, `projects`, vault name or host). */
  authority: string;
  /** Path segments after the authority, percent-decoded, empty ones dropped. */
  segments: string[];
  query: URLSearchParams;
}

/** Splits `<scheme>://<authority>/<seg>/<seg>?<query>`; throws INVALID_URI with the accepted forms. */
export function parseCloudUri(uri: string, scheme: string, forms: readonly string[]): CloudUri {
  const bad = (why: string): SecretStoreError =>
    new SecretStoreError(`invalid store URI '${safeUri(uri)}': ${why}; use ${forms.join(' or ')}`, {
      code: 'INVALID_URI',
    });
  const m = /^([A-Za-z][A-Za-z0-9+.-]*):\/\/([^/?#]*)([^?#]*)(?:\?([^#]*))?(#.*)?$/s.exec(uri);
  if (!m || (m[1] as string).toLowerCase() !== scheme) throw bad(`expected '${scheme}://...'`);
  if (m[5] !== undefined) throw bad('fragments are not supported');
  const authority = m[2] as string;
  if (authority === '')
    throw bad(
      'missing ' + (scheme === 'azure-kv' ? 'vault name' : scheme === 'aws-sm' ? 'region' : "'projects/<project>'"),
    );
  if (authority.includes('@')) throw bad('credentials do not belong in the URI (use the SDK credential chain)');
  const segments: string[] = [];
  for (const raw of (m[3] as string).split('/')) {
    if (raw === '') continue;
    try {
      segments.push(decodeURIComponent(raw));
    } catch {
      throw bad('malformed percent-encoding');
    }
  }
  return { scheme, authority, segments, query: new URLSearchParams(m[4] ?? '') };
}

/** Rejects query parameters a backend does not know (a typo must not silently change behaviour). */
export function checkQueryKeys(u: CloudUri, uri: string, allowed: readonly string[], forms: readonly string[]): void {
  for (const k of new Set(u.query.keys())) {
    if (!allowed.includes(k)) {
      throw new SecretStoreError(
        `invalid store URI '${safeUri(uri)}': unknown option '${k}' (known: ${allowed.join(', ') || 'none'}); use ${forms.join(' or ')}`,
        { code: 'INVALID_URI' },
      );
    }
  }
}

/** What to do when the target name belongs to a secret that is scheduled for deletion / soft-deleted. */
export type OnDeleted = 'recover' | 'fail';

export function parseOnDeleted(u: CloudUri, uri: string, forms: readonly string[]): OnDeleted {
  const v = u.query.get('onDeleted');
  if (v === null || v === 'recover' || v === 'restore') return 'recover';
  if (v === 'fail') return 'fail';
  throw new SecretStoreError(
    `invalid store URI '${safeUri(uri)}': onDeleted must be 'recover' or 'fail'; use ${forms.join(' or ')}`,
    {
      code: 'INVALID_URI',
    },
  );
}

/** A test/LocalStack endpoint override: http(s) only, no credentials, no path games. */
export function parseEndpoint(u: CloudUri, uri: string, forms: readonly string[]): URL | undefined {
  const v = u.query.get('endpoint');
  if (v === null) return undefined;
  let url: URL;
  try {
    url = new URL(v);
  } catch {
    throw new SecretStoreError(
      `invalid store URI '${safeUri(uri)}': endpoint is not a URL; use ${forms.join(' or ')}`,
      { code: 'INVALID_URI' },
    );
  }
  if ((url.protocol !== 'http:' && url.protocol !== 'https:') || url.username || url.password) {
    throw new SecretStoreError(
      `invalid store URI '${safeUri(uri)}': endpoint must be an http(s) URL without credentials`,
      {
        code: 'INVALID_URI',
      },
    );
  }
  refusePlainHttp(url, 'endpoint=', safeUri(uri));
  return url;
}

export function safeUri(uri: string): string {
  return redactSecrets(redactUserinfo(uri));
}

// ---------------------------------------------------------------------------------------------
// Names

function splitLogical(logical: string, store: string): string[] {
  const parts = typeof logical === 'string' ? logical.split('/') : [];
  if (parts.length !== 3 || parts.some((p) => p === '')) {
    throw new SecretStoreError(
      `secret store ${store}: invalid logical secret name '${logical}': expected '<project_env>/<client>/<key>'`,
      {
        code: 'INVALID_ARGUMENT',
        store,
      },
    );
  }
  return parts;
}

export function shortHash(text: string, hexChars = 16): string {
  return createHash('sha256').update(text, 'utf8').digest('hex').slice(0, hexChars);
}

export interface EscapeNameRules {
  /** Characters kept as they are inside a segment (the escape character must not be one of them). */
  literal: RegExp;
  /** Escape character, followed by two upper-case hex digits per UTF-8 byte. */
  escape: string;
  /** What joins the prefix and the three segments. */
  separator: string;
  maxLength: number;
}

/**
 * Reversible mapping for alphabets that have a spare character to escape with (AWS, GCP):
 * `[prefix SEP] seg SEP seg SEP seg` where every character outside `literal` (the escape character
 * included) becomes ESC + two hex digits per UTF-8 byte. The separator is either a character no
 * escaped segment contains, or ESC + ESC, which no escape sequence produces. Hence injective.
 * Names over `maxLength` are cut at an escape boundary and end in `ESC h <16 hex of sha256>`:
 * `ESC h` never occurs in an untruncated name, so truncated and untruncated names never meet, and
 * two truncated names meet only on a 64-bit hash collision.
 */
export function escapeMapName(logical: string, prefix: string, rules: EscapeNameRules, store: string): string {
  const segs = splitLogical(logical, store).map((seg) => {
    let out = '';
    for (const ch of seg) {
      if (rules.literal.test(ch) && ch !== rules.escape) out += ch;
      else for (const b of Buffer.from(ch, 'utf8')) out += rules.escape + b.toString(16).toUpperCase().padStart(2, '0');
    }
    return out;
  });
  const full = [...(prefix ? [prefix] : []), ...segs].join(rules.separator);
  if (full.length <= rules.maxLength) return full;
  const suffix = `${rules.escape}h${shortHash(logical)}`;
  let cut = rules.maxLength - suffix.length;
  // Never cut inside an escape sequence (ESC X X) or a multi-character separator.
  for (let i = Math.max(0, cut - 2); i < cut; i++) if (full[i] === rules.escape) cut = i;
  if (rules.separator.length > 1 && full.slice(cut - 1, cut + 1) === rules.separator) cut -= 1;
  return full.slice(0, cut) + suffix;
}

export interface HashNameRules {
  /** A segment is "clean" (kept verbatim) when it matches this. Clean segments must not contain `separator`. */
  clean: RegExp;
  separator: string;
  /** Marks names that were sanitised: must be impossible in a clean join. */
  marker: string;
  /** Replacement for one character outside the alphabet when sanitising. */
  sanitize: (ch: string) => string;
  maxLength: number;
}

/**
 * Mapping for tight alphabets (Azure: `[0-9A-Za-z-]`): when every segment is clean the name is the
 * readable join; otherwise each bad character is replaced (readably, lossily) and the name ends in
 * `marker + <16 hex of sha256(logical)>`. Clean joins never contain the marker, so they never meet
 * a sanitised name; sanitised names meet only on a 64-bit hash collision.
 */
export function hashMapName(logical: string, prefix: string, rules: HashNameRules, store: string): string {
  const segs = splitLogical(logical, store);
  const head = prefix ? [prefix] : [];
  if (segs.every((s) => rules.clean.test(s))) {
    const joined = [...head, ...segs].join(rules.separator);
    if (joined.length <= rules.maxLength && !joined.includes(rules.marker)) return joined;
  }
  const suffix = rules.marker + shortHash(logical);
  const readable = [
    ...head,
    ...segs.map((s) =>
      Array.from(s)
        .map((ch) => (rules.clean.test(ch) ? ch : rules.sanitize(ch)))
        .join(''),
    ),
  ]
    .join(rules.separator)
    .replace(/-+$/, '');
  return readable.slice(0, rules.maxLength - suffix.length).replace(/-+$/, '') + suffix;
}

// ---------------------------------------------------------------------------------------------
// Metadata

export const MANAGED_BY_KEY = 'managed-by';
export const MANAGED_BY_VALUE = 'kms-sync';
export const META_KEYS = ['projectEnv', 'client', 'key', 'keyId', 'target', 'issuedAt', 'expiresAt'] as const;

/** Metadata as string pairs (expiresAt omitted when null, target when absent), plus managed-by. */
export function metadataPairs(meta: SecretMetadata): Record<string, string> {
  const out: Record<string, string> = {};
  for (const k of META_KEYS) {
    const v = meta[k];
    if (typeof v === 'string' && v !== '') out[k] = v;
  }
  out[MANAGED_BY_KEY] = MANAGED_BY_VALUE;
  return out;
}

/** The inverse of `metadataPairs` for listings (unknown keys ignored). */
export function metadataFromPairs(
  pairs: Record<string, string | undefined> | undefined,
  keyOf: (k: string) => string = (k) => k,
): Partial<SecretMetadata> {
  const out: Partial<SecretMetadata> = {};
  if (!pairs) return out;
  for (const k of META_KEYS) {
    const v = pairs[keyOf(k)];
    if (typeof v !== 'string') continue;
    if (k === 'target' && v === '') continue; // an empty target tag: cleared, unknown
    if (k === 'expiresAt' && v === '')
      out.expiresAt = null; // an empty expiry tag: cleared, never expires
    else out[k] = v;
  }
  if (out.expiresAt === undefined && pairs[keyOf('keyId')] !== undefined) out.expiresAt = null;
  return out;
}

/**
 * A target as a metadata value of at most `max` characters: `encode(target)` when that fits, else
 * `targetTag(target)` (which `targetMatches` in store.ts compares). Targets are short URLs in
 * practice; only a declared KMS_SYNC_TARGET longer than the backend allows ends up as a tag.
 */
export function targetValue(target: string, max: number, encode: (s: string) => string = (s) => s): string {
  const v = encode(target);
  return v.length <= max ? v : targetTag(target);
}

export function sha256Hex(value: string): string {
  return createHash('sha256').update(value, 'utf8').digest('hex');
}

/**
 * A deterministic idempotency token (UUID-shaped, 36 characters) for (secret name, key id, value):
 * the same write retried carries the same token, a different key or value never does.
 */
export function idempotencyToken(name: string, keyId: string, value: string): string {
  const h = createHash('sha256')
    .update(`kms-sync/v1\0${name}\0${keyId}\0${sha256Hex(value)}`, 'utf8')
    .digest('hex');
  // RFC 4122 layout (version 5-style nibble, variant 10xx) so strict validators accept it.
  const variant = ((parseInt(h[16] as string, 16) & 0x3) | 0x8).toString(16);
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

// ---------------------------------------------------------------------------------------------
// Validation and errors

export function validateEntries(entries: SecretEntry[], store: string): void {
  for (const e of entries) {
    if (!e || typeof e.name !== 'string' || e.name === '') {
      throw new SecretStoreError(`secret store ${store}: every entry needs a non-empty name`, {
        code: 'INVALID_ARGUMENT',
        store,
      });
    }
    if (typeof e.value !== 'string' || e.value === '') {
      throw new SecretStoreError(`secret store ${store}: secret '${e.name}': the value must be a non-empty string`, {
        code: 'INVALID_ARGUMENT',
        store,
      });
    }
    const m = e.meta as unknown as Record<string, unknown> | undefined;
    if (!m || typeof m !== 'object') {
      throw new SecretStoreError(`secret store ${store}: secret '${e.name}': metadata missing`, {
        code: 'INVALID_ARGUMENT',
        store,
      });
    }
    for (const f of ['projectEnv', 'client', 'key', 'keyId', 'issuedAt'] as const) {
      if (typeof m[f] !== 'string') {
        throw new SecretStoreError(`secret store ${store}: secret '${e.name}': metadata '${f}' must be a string`, {
          code: 'INVALID_ARGUMENT',
          store,
        });
      }
    }
    if (m.target !== undefined && (typeof m.target !== 'string' || m.target === '')) {
      throw new SecretStoreError(
        `secret store ${store}: secret '${e.name}': metadata 'target', when given, must be a non-empty string`,
        { code: 'INVALID_ARGUMENT', store },
      );
    }
  }
  const seen = new Set<string>();
  for (const e of entries) {
    if (seen.has(e.name)) {
      throw new SecretStoreError(`secret store ${store}: secret '${e.name}' appears twice in one batch`, {
        code: 'INVALID_ARGUMENT',
        store,
      });
    }
    seen.add(e.name);
  }
}

/** A short, value-free description of an SDK error: its name/code, HTTP status and redacted message. */
export function describeSdkError(err: unknown): string {
  if (err instanceof SecretStoreError) return err.message;
  if (!err || typeof err !== 'object') return 'unknown error';
  const e = err as {
    name?: unknown;
    code?: unknown;
    statusCode?: unknown;
    $metadata?: { httpStatusCode?: unknown };
    message?: unknown;
  };
  const parts: string[] = [];
  const label = typeof e.name === 'string' && e.name !== 'Error' ? e.name : undefined;
  if (label) parts.push(label);
  if ((typeof e.code === 'string' || typeof e.code === 'number') && String(e.code) !== label)
    parts.push(`code ${String(e.code)}`);
  const status = typeof e.statusCode === 'number' ? e.statusCode : e.$metadata?.httpStatusCode;
  if (typeof status === 'number') parts.push(`HTTP ${status}`);
  let msg = typeof e.message === 'string' ? redactSecrets(e.message).replace(/\s+/g, ' ').trim() : '';
  if (msg.length > 300) msg = `${msg.slice(0, 297)}...`;
  return parts.length ? `${parts.join(', ')}${msg ? `: ${msg}` : ''}` : msg || 'unknown error';
}

/** Thrown by `putMany` when some entries landed and others did not; names only, never values. */
export class PartialWriteError extends SecretStoreError {
  readonly stored: string[];
  readonly notStored: string[];

  constructor(message: string, code: SecretStoreErrorCode, store: string, stored: string[], notStored: string[]) {
    super(message, { code, store });
    this.name = 'SecretStoreError';
    this.stored = stored;
    this.notStored = notStored;
  }
}

/**
 * Writes entries one after the other, stopping at the first failure. The error names every entry
 * that was NOT stored (the failed one and those never attempted) and how many were.
 */
export async function putSequentially(
  entries: SecretEntry[],
  store: string,
  putOne: (e: SecretEntry) => Promise<void>,
  classify: (err: unknown) => SecretStoreErrorCode,
): Promise<void> {
  validateEntries(entries, store);
  const stored: string[] = [];
  for (let i = 0; i < entries.length; i++) {
    const e = entries[i] as SecretEntry;
    try {
      await putOne(e);
      stored.push(e.name);
    } catch (err) {
      const notStored = entries.slice(i).map((x) => x.name);
      const landed = stored.length ? ` (stored: ${stored.join(', ')})` : '';
      throw new PartialWriteError(
        `secret store ${store}: stored ${stored.length} of ${entries.length} secret(s)${landed}; NOT stored: ${notStored.join(', ')}; ` +
          `writing '${e.name}' failed: ${describeSdkError(err)}`,
        err instanceof SecretStoreError ? err.code : classify(err),
        store,
        stored,
        notStored,
      );
    }
  }
}

/** CRC32C (Castagnoli), as GCP Secret Manager expects in `payload.dataCrc32c`. */
const CRC32C_TABLE = (() => {
  const t = new Uint32Array(256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? 0x82f63b78 ^ (c >>> 1) : c >>> 1;
    t[n] = c >>> 0;
  }
  return t;
})();

export function crc32c(data: Uint8Array): number {
  let c = 0xffffffff;
  for (const b of data) c = (CRC32C_TABLE[(c ^ b) & 0xff] as number) ^ (c >>> 8);
  return (c ^ 0xffffffff) >>> 0;
}

/** Bounded-concurrency map (keeps order). */
export async function mapLimit<T, R>(items: T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const i = next++;
      out[i] = await fn(items[i] as T);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return out;
}
