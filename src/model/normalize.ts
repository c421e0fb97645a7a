// Canonical forms used for comparison, so that equivalent notations never show up as changes.
import { isIPv4, isIPv6 } from 'node:net';
import type { JsonValue } from './resources.js';

export class NormalizeError extends Error {}

function ipv4ToBigInt(ip: string): bigint {
  return ip.split('.').reduce((acc, o) => (acc << 8n) | BigInt(Number(o)), 0n);
}

function bigIntToIpv4(n: bigint): string {
  return [24n, 16n, 8n, 0n].map((s) => ((n >> s) & 255n).toString()).join('.');
}

function expandIpv6(ip: string): bigint {
  let text = ip.toLowerCase();
  // Embedded IPv4 tail (::ffff:1.2.3.4)
  const v4 = /(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (v4?.[1]) {
    const n = ipv4ToBigInt(v4[1]);
    text = text.slice(0, -v4[1].length) + `${(n >> 16n).toString(16)}:${(n & 0xffffn).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const h = head ? head.split(':') : [];
  const t = tail !== undefined && tail !== '' ? tail.split(':') : [];
  const fill = tail === undefined ? [] : new Array(8 - h.length - t.length).fill('0');
  const groups = [...h, ...fill, ...t];
  return groups.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g || '0', 16)), 0n);
}

function bigIntToIpv6(n: bigint): string {
  const groups: string[] = [];
  for (let i = 7; i >= 0; i--) groups.push(((n >> BigInt(i * 16)) & 0xffffn).toString(16));
  // RFC 5952: compress the longest run of two or more zero groups.
  let best = -1;
  let bestLen = 0;
  for (let i = 0; i < 8; ) {
    if (groups[i] !== '0') {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && groups[j] === '0') j++;
    if (j - i > bestLen && j - i >= 2) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  if (best < 0) return groups.join(':');
  return `${groups.slice(0, best).join(':')}::${groups.slice(best + bestLen).join(':')}`;
}

/**
 * Canonical CIDR: network address with host bits cleared, explicit prefix, compressed IPv6.
 * `10.0.0.1` → `10.0.0.1/32`; `10.1.2.3/8` → `10.0.0.0/8`; `2001:DB8::/32` → `2001:db8::/32`.
 */
export function canonicalCidr(input: string): string {
  // Configurations and live clients repeat the same few ranges thousands of times.
  let out = cidrCache.get(input);
  if (out === undefined) {
    out = canonicalCidrOf(input);
    if (cidrCache.size >= CIDR_CACHE_SIZE) cidrCache.clear();
    cidrCache.set(input, out);
  }
  return out;
}

const cidrCache = new Map<string, string>();
const CIDR_CACHE_SIZE = 10_000;

function canonicalCidrOf(input: string): string {
  const text = input.trim();
  const slash = text.indexOf('/');
  const ip = slash >= 0 ? text.slice(0, slash) : text;
  const prefixText = slash >= 0 ? text.slice(slash + 1) : undefined;
  const v4 = isIPv4(ip);
  if (!v4 && !isIPv6(ip)) throw new NormalizeError(`invalid IP address or CIDR range: ${JSON.stringify(input)}`);
  const bits = v4 ? 32 : 128;
  let prefix = bits;
  if (prefixText !== undefined) {
    if (!/^\d{1,3}$/.test(prefixText) || Number(prefixText) > bits) {
      throw new NormalizeError(`invalid prefix length in ${JSON.stringify(input)} (0-${bits})`);
    }
    prefix = Number(prefixText);
  }
  const value = v4 ? ipv4ToBigInt(ip) : expandIpv6(ip);
  const mask = prefix === 0 ? 0n : ((1n << BigInt(prefix)) - 1n) << BigInt(bits - prefix);
  const network = value & mask;
  return `${v4 ? bigIntToIpv4(network) : bigIntToIpv6(network)}/${prefix}`;
}

/** CIDR list as a sorted, de-duplicated set of canonical ranges. */
export function canonicalCidrSet(list: readonly string[] | undefined): string[] {
  return [...new Set((list ?? []).map(canonicalCidr))].sort();
}

export function cidrContains(cidr: string, ip: string): boolean {
  const [net = '', prefixText = ''] = canonicalCidr(cidr).split('/');
  const v4 = isIPv4(net);
  if (v4 !== isIPv4(ip) || (!v4 && !isIPv6(ip))) return false;
  const bits = v4 ? 32 : 128;
  const prefix = Number(prefixText);
  const mask = prefix === 0 ? 0n : ((1n << BigInt(prefix)) - 1n) << BigInt(bits - prefix);
  const a = v4 ? ipv4ToBigInt(net) : expandIpv6(net);
  const b = v4 ? ipv4ToBigInt(ip) : expandIpv6(ip);
  return (a & mask) === (b & mask);
}

const ISO_8601 = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}(?::?\d{2})?)?)?$/i;

/** Any ISO 8601 timestamp → `YYYY-MM-DDTHH:mm:ss.sssZ` (UTC). Date-only means midnight UTC. */
export function canonicalTimestamp(input: string): string {
  const text = input.trim();
  if (!ISO_8601.test(text)) throw new NormalizeError(`invalid ISO 8601 timestamp: ${JSON.stringify(input)}`);
  // Date.parse treats a date-time without offset as local time; pin it to UTC.
  const hasZone = /(Z|[+-]\d{2}(:?\d{2})?)$/i.test(text) && text.length > 10;
  const ms = Date.parse(hasZone || text.length === 10 ? text : `${text}Z`);
  if (Number.isNaN(ms)) throw new NormalizeError(`invalid ISO 8601 timestamp: ${JSON.stringify(input)}`);
  return new Date(ms).toISOString();
}

const TTL_UNITS: Record<string, number> = { s: 1e3, m: 60e3, h: 3600e3, d: 86400e3, w: 7 * 86400e3 };

/** `90d`, `12h`, `1w2d` → milliseconds. */
export function parseTtl(input: string): number {
  const text = input.trim();
  if (!/^(\d+[smhdw])+$/.test(text)) {
    throw new NormalizeError(`invalid ttl ${JSON.stringify(input)}: use a number and a unit s, m, h, d or w, e.g. 90d`);
  }
  let total = 0;
  for (const m of text.matchAll(/(\d+)([smhdw])/g)) total += Number(m[1]) * (TTL_UNITS[m[2] ?? 's'] ?? 0);
  if (total <= 0) throw new NormalizeError(`ttl must be positive: ${JSON.stringify(input)}`);
  return total;
}

/** Stable JSON with sorted object keys: the canonical form of metadata and schema objects. */
export function canonicalJson(value: JsonValue | undefined): string {
  return JSON.stringify(sortKeys(value ?? null));
}

function sortKeys(value: JsonValue): JsonValue {
  if (Array.isArray(value)) return value.map(sortKeys);
  if (value && typeof value === 'object') {
    const out: { [k: string]: JsonValue } = {};
    for (const k of Object.keys(value).sort()) {
      // A key "__proto__" (JSON.parse makes it an own field) assigned would set out's prototype, or
      // be dropped: two different values would share one canonical text (a seal, a digest).
      if (k === '__proto__')
        Object.defineProperty(out, k, {
          value: sortKeys(value[k] as JsonValue),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      else out[k] = sortKeys(value[k] as JsonValue);
    }
    return out;
  }
  return value;
}

export function deepEqualJson(a: JsonValue | undefined, b: JsonValue | undefined): boolean {
  return canonicalJson(a) === canonicalJson(b);
}
