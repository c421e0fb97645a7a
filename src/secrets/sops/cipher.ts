/**
 * SOPS's value cipher: AES-256-GCM with a 32-byte random IV, the value's tree path as additional
 * data, serialised as `ENC[AES256_GCM,data:<b64>,iv:<b64>,tag:<b64>,type:<type>]` (standard
 * base64, 16-byte tag split off the ciphertext). Empty values are stored as empty strings, as
 * SOPS does.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

export type SopsPlain =
  | { type: 'str'; value: string }
  | { type: 'int'; value: number }
  | { type: 'float'; value: number }
  | { type: 'bool'; value: boolean }
  | { type: 'bytes'; value: Uint8Array }
  | { type: 'comment'; value: string };

const IV_SIZE = 32;
const TAG_SIZE = 16;
const ENC_RE = /^ENC\[AES256_GCM,data:(.+),iv:(.+),tag:(.+),type:(.+)\]/;
const B64_RE = /^[A-Za-z0-9+/]*={0,2}$/;

export class SopsCipherError extends Error {
  readonly reason: 'format' | 'auth' | 'type';
  constructor(reason: 'format' | 'auth' | 'type', message: string) {
    super(message);
    this.name = 'SopsCipherError';
    this.reason = reason;
  }
}

export function isSopsEncrypted(v: unknown): v is string {
  return typeof v === 'string' && ENC_RE.test(v);
}

function b64(s: string, what: string): Buffer {
  if (!B64_RE.test(s) || s.length % 4 !== 0) throw new SopsCipherError('format', `bad base64 in ${what}`);
  return Buffer.from(s, 'base64');
}

/** Encrypts a string (type str) for the tree path `aad` (`a:b:c:`). */
export function encryptSopsString(plain: string, key: Uint8Array, aad: string): string {
  if (plain === '') return '';
  return encryptBytes(Buffer.from(plain, 'utf8'), 'str', key, aad);
}

/**
 * IVs are cut from one draw of random bytes, 128 at a time, instead of one draw each: a write of
 * thousands of new values (bench scenario 6: 2,000) paid a call into the random generator per value
 * (~4-8 µs). Each slice is handed out once; an IV is no secret (it is written beside the value).
 */
const IV_POOL = 128 * IV_SIZE;
let ivPool = Buffer.alloc(0);
let ivNext = 0;

/** A fresh random IV: IV_SIZE bytes no other call got. */
export function freshIv(): Buffer {
  if (ivNext + IV_SIZE > ivPool.length) {
    ivPool = randomBytes(IV_POOL);
    ivNext = 0;
  }
  const iv = ivPool.subarray(ivNext, ivNext + IV_SIZE);
  ivNext += IV_SIZE;
  return iv;
}

export function encryptBytes(plain: Uint8Array, type: string, key: Uint8Array, aad: string): string {
  if (key.length !== 32) throw new Error('SOPS data key must be 32 bytes');
  const iv = freshIv();
  const c = createCipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_SIZE });
  c.setAAD(Buffer.from(aad, 'utf8'));
  const data = Buffer.concat([c.update(plain), c.final()]);
  const tag = c.getAuthTag();
  return `ENC[AES256_GCM,data:${data.toString('base64')},iv:${iv.toString('base64')},tag:${tag.toString('base64')},type:${type}]`;
}

/** Decrypts an `ENC[...]` string. An empty string decrypts to the empty string, as in SOPS. */
export function decryptSopsValue(ciphertext: string, key: Uint8Array, aad: string): SopsPlain {
  if (ciphertext === '') return { type: 'str', value: '' };
  const { plain, type } = decryptRaw(ciphertext, key, aad);
  return typed(plain, type);
}

/** The same plaintext, of the same type, encrypted under `to` instead of `from` (a re-key). */
export function reencryptSopsValue(ciphertext: string, from: Uint8Array, to: Uint8Array, aad: string): string {
  if (ciphertext === '') return '';
  const { plain, type } = decryptRaw(ciphertext, from, aad);
  typed(plain, type); // a value no reader could read is not carried over silently
  return encryptBytes(plain, type, to, aad);
}

function decryptRaw(ciphertext: string, key: Uint8Array, aad: string): { plain: Buffer; type: string } {
  const m = ENC_RE.exec(ciphertext);
  if (!m) throw new SopsCipherError('format', 'value does not match the SOPS data format');
  const data = b64(m[1] as string, 'data');
  const iv = b64(m[2] as string, 'iv');
  const tag = b64(m[3] as string, 'tag');
  const type = m[4] as string;
  if (iv.length === 0 || tag.length !== TAG_SIZE) throw new SopsCipherError('format', 'bad iv or tag length');
  let plain: Buffer;
  try {
    const d = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_SIZE });
    d.setAAD(Buffer.from(aad, 'utf8'));
    d.setAuthTag(tag);
    plain = Buffer.concat([d.update(data), d.final()]);
  } catch {
    throw new SopsCipherError('auth', 'authentication failed');
  }
  return { plain, type };
}

function typed(plain: Buffer, type: string): SopsPlain {
  const text = plain.toString('utf8');
  switch (type) {
    case 'str':
      return { type: 'str', value: text };
    case 'comment':
      return { type: 'comment', value: text };
    case 'bytes':
      return { type: 'bytes', value: new Uint8Array(plain) };
    case 'int':
    case 'int64': {
      if (!/^[+-]?\d+$/.test(text)) throw new SopsCipherError('type', 'bad int value');
      return { type: 'int', value: Number.parseInt(text, 10) };
    }
    case 'float': {
      const f = Number(text);
      if (text.trim() === '' || Number.isNaN(f)) throw new SopsCipherError('type', 'bad float value');
      return { type: 'float', value: f };
    }
    case 'bool': {
      // Go's strconv.ParseBool
      if (['1', 't', 'T', 'TRUE', 'true', 'True'].includes(text)) return { type: 'bool', value: true };
      if (['0', 'f', 'F', 'FALSE', 'false', 'False'].includes(text)) return { type: 'bool', value: false };
      throw new SopsCipherError('type', 'bad bool value');
    }
    default:
      throw new SopsCipherError('type', `unknown datatype '${type}'`);
  }
}

/** Go's strconv.FormatFloat(f, 'f', -1, 64): shortest round-trip digits, never an exponent. */
export function goFormatFloat(f: number): string {
  if (!Number.isFinite(f)) return f > 0 ? '+Inf' : f < 0 ? '-Inf' : 'NaN';
  if (Object.is(f, -0)) return '-0';
  const s = String(f);
  const m = /^(-?)(\d+)(?:\.(\d+))?e([+-]\d+)$/.exec(s);
  if (!m) return s;
  const sign = m[1] as string;
  const digits = (m[2] as string) + (m[3] ?? '');
  const exp = Number(m[4]) - (m[3]?.length ?? 0);
  if (exp >= 0) return sign + digits + '0'.repeat(exp);
  const point = digits.length + exp;
  if (point > 0) return `${sign}${digits.slice(0, point)}.${digits.slice(point)}`;
  return `${sign}0.${'0'.repeat(-point)}${digits}`;
}

/** SOPS's ToBytes: what a leaf contributes to the MAC. Comments contribute nothing. */
export function macBytes(v: SopsPlain | string | number | boolean): Uint8Array {
  const text = macText(v);
  return text === undefined ? (v as { value: Uint8Array }).value : Buffer.from(text, 'utf8');
}

/** The text whose UTF-8 is macBytes(v); undefined for a bytes value, whose bytes are its own. */
export function macText(v: SopsPlain | string | number | boolean): string | undefined {
  if (typeof v === 'string') return v;
  if (typeof v === 'boolean') return v ? 'True' : 'False';
  if (typeof v === 'number') return Number.isInteger(v) ? intString(v) : goFormatFloat(v);
  switch (v.type) {
    case 'str':
      return v.value;
    case 'comment':
      return '';
    case 'bytes':
      return undefined;
    case 'bool':
      return v.value ? 'True' : 'False';
    case 'int':
      return intString(v.value);
    case 'float':
      return goFormatFloat(v.value);
  }
}

function intString(n: number): string {
  return Number.isSafeInteger(n) ? String(n) : goFormatFloat(n);
}
