// Encrypted validation bodies: X25519 ECDH + HKDF-SHA256 → AES-256-GCM (documented in the contract).
import {
  createCipheriv,
  createDecipheriv,
  createPrivateKey,
  createPublicKey,
  diffieHellman,
  generateKeyPairSync,
  hkdfSync,
  randomBytes,
  type KeyObject,
} from 'node:crypto';
import { ApiError } from './errors.js';

export const ENCRYPTION_VERSION = '1';
export const ENCRYPTION_ALG = 'X25519-HKDF-SHA256-A256GCM';
export const HKDF_INFO = 'kms-validation-v1';
const AAD = Buffer.from('v1');
// DER prefixes of X25519 SPKI / PKCS8 around the raw 32-byte key (RFC 8410).
const SPKI_PREFIX = Buffer.from('302a300506032b656e032100', 'hex');

export function rawPublicKey(key: KeyObject): Buffer {
  return key.export({ type: 'spki', format: 'der' }).subarray(SPKI_PREFIX.length);
}

export function publicKeyFromRaw(raw: Buffer): KeyObject {
  return createPublicKey({ key: Buffer.concat([SPKI_PREFIX, raw]), format: 'der', type: 'spki' });
}

function deriveKey(shared: Buffer, epk: Buffer, serverPublic: Buffer): Buffer {
  return Buffer.from(hkdfSync('sha256', shared, Buffer.concat([epk, serverPublic]), HKDF_INFO, 32));
}

export interface EncryptedBody {
  v: string;
  epk: string;
  iv: string;
  ct: string;
}

/** The emulator's long-lived X25519 key pair. */
export class ServerKeyPair {
  readonly privateKey: KeyObject;
  readonly publicRaw: Buffer;
  constructor(privateKey?: KeyObject) {
    this.privateKey = privateKey ?? generateKeyPairSync('x25519').privateKey;
    this.publicRaw = rawPublicKey(createPublicKey(this.privateKey));
  }

  static fromPkcs8(b64: string): ServerKeyPair {
    return new ServerKeyPair(createPrivateKey({ key: Buffer.from(b64, 'base64'), format: 'der', type: 'pkcs8' }));
  }

  toPkcs8(): string {
    return this.privateKey.export({ type: 'pkcs8', format: 'der' }).toString('base64');
  }

  describe() {
    return { v: ENCRYPTION_VERSION, alg: ENCRYPTION_ALG, publicKey: this.publicRaw.toString('base64') };
  }

  decrypt(body: unknown): unknown {
    const fail = (why: string) => new ApiError(400, 'DECRYPTION_FAILED', `encrypted body rejected: ${why}`);
    if (!body || typeof body !== 'object' || Array.isArray(body)) throw fail('expected {v, epk, iv, ct}');
    const { v, epk, iv, ct } = body as Record<string, unknown>;
    for (const [name, value] of Object.entries({ v, epk, iv, ct }))
      if (typeof value !== 'string') throw fail(`field '${name}' must be a string`);
    if (v !== ENCRYPTION_VERSION) throw fail(`unsupported version ${JSON.stringify(v)} (supported: "1")`);
    const epkRaw = Buffer.from(epk as string, 'base64');
    const ivRaw = Buffer.from(iv as string, 'base64');
    const ctRaw = Buffer.from(ct as string, 'base64');
    if (epkRaw.length !== 32) throw fail('epk must be a 32-byte X25519 public key');
    if (ivRaw.length !== 12) throw fail('iv must be 12 bytes');
    if (ctRaw.length < 17) throw fail('ct too short');
    try {
      const shared = diffieHellman({ privateKey: this.privateKey, publicKey: publicKeyFromRaw(epkRaw) });
      const key = deriveKey(shared, epkRaw, this.publicRaw);
      const decipher = createDecipheriv('aes-256-gcm', key, ivRaw);
      decipher.setAAD(AAD);
      decipher.setAuthTag(ctRaw.subarray(ctRaw.length - 16));
      const plain = Buffer.concat([decipher.update(ctRaw.subarray(0, ctRaw.length - 16)), decipher.final()]);
      return JSON.parse(plain.toString('utf8'));
    } catch {
      throw fail('authentication failed or the plaintext is not JSON');
    }
  }
}

/** Client side of the scheme (used by SDK-like callers and tests). */
export function encryptForServer(serverPublicB64: string, payload: unknown): EncryptedBody {
  const serverPublic = Buffer.from(serverPublicB64, 'base64');
  const eph = generateKeyPairSync('x25519');
  const epk = rawPublicKey(eph.publicKey);
  const shared = diffieHellman({ privateKey: eph.privateKey, publicKey: publicKeyFromRaw(serverPublic) });
  const key = deriveKey(shared, epk, serverPublic);
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(AAD);
  const ct = Buffer.concat([cipher.update(JSON.stringify(payload), 'utf8'), cipher.final(), cipher.getAuthTag()]);
  return { v: ENCRYPTION_VERSION, epk: epk.toString('base64'), iv: iv.toString('base64'), ct: ct.toString('base64') };
}
