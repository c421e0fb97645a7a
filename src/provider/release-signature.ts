// Detached signatures of release checksum files: OpenSSH's SSHSIG format, what `ssh-keygen -Y sign
// -n kms-sync-release` writes (the wire format is OpenSSH's PROTOCOL.sshsig). Checked here with
// node:crypto alone: no network, no gpg or ssh-keygen needed on the installing machine. Ed25519
// keys only (what `ssh-keygen -t ed25519` makes, and what the release workflow uses).
import { createHash, createPublicKey, verify } from 'node:crypto';

/** The namespace releases are signed in: a signature made for anything else (git commits, files) does not count. */
export const RELEASE_SIGNATURE_NAMESPACE = 'kms-sync-release';
const MAGIC = Buffer.from('SSHSIG');

class Reader {
  private at = 0;
  private readonly buf: Buffer;
  constructor(buf: Buffer) {
    this.buf = buf;
  }
  bytes(n: number): Buffer {
    if (this.at + n > this.buf.length) throw new Error('truncated');
    const out = this.buf.subarray(this.at, this.at + n);
    this.at += n;
    return out;
  }
  u32(): number {
    return this.bytes(4).readUInt32BE(0);
  }
  string(): Buffer {
    return this.bytes(this.u32());
  }
  done(): boolean {
    return this.at === this.buf.length;
  }
}

const sshString = (b: Buffer) => {
  const len = Buffer.alloc(4);
  len.writeUInt32BE(b.length);
  return Buffer.concat([len, b]);
};

/** The Ed25519 public keys (raw 32 bytes, with their comment) in text of `ssh-ed25519 AAAA… comment` lines (also allowed_signers lines: `principal ssh-ed25519 AAAA…`). */
export function parseTrustedKeys(text: string, file: string): { key: Buffer; comment: string }[] {
  const keys: { key: Buffer; comment: string }[] = [];
  for (const [i, raw] of text.split('\n').entries()) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const words = line.split(/\s+/);
    const at = words.indexOf('ssh-ed25519');
    if (at < 0 || !words[at + 1])
      throw new Error(`${file} line ${i + 1}: not an ssh-ed25519 public key (only Ed25519 keys sign releases)`);
    const r = new Reader(Buffer.from(words[at + 1]!, 'base64'));
    try {
      if (r.string().toString() !== 'ssh-ed25519') throw new Error('bad key type');
      const key = r.string();
      if (key.length !== 32 || !r.done()) throw new Error('bad key length');
      keys.push({ key: Buffer.from(key), comment: words.slice(at + 2).join(' ') });
    } catch {
      throw new Error(`${file} line ${i + 1}: the key does not decode as ssh-ed25519`);
    }
  }
  return keys;
}

/**
 * Checks an armored SSH signature of `message` against `trusted` keys. Returns the comment of the
 * key that made it; throws with the reason otherwise.
 */
export function verifyReleaseSignature(
  message: Buffer,
  armored: string,
  trusted: { key: Buffer; comment: string }[],
): string {
  const body = /-----BEGIN SSH SIGNATURE-----([\s\S]*?)-----END SSH SIGNATURE-----/.exec(armored)?.[1];
  if (!body) throw new Error('not an SSH signature (no BEGIN/END SSH SIGNATURE lines)');
  const r = new Reader(Buffer.from(body.replace(/\s+/g, ''), 'base64'));
  let publicKey: Buffer, namespace: string, reserved: Buffer, hashAlg: string, sigType: string, sig: Buffer;
  try {
    if (!r.bytes(6).equals(MAGIC)) throw new Error();
    if (r.u32() !== 1) throw new Error();
    const pk = new Reader(r.string());
    if (pk.string().toString() !== 'ssh-ed25519') throw new Error('key');
    publicKey = Buffer.from(pk.string());
    namespace = r.string().toString();
    reserved = r.string();
    hashAlg = r.string().toString();
    const s = new Reader(r.string());
    sigType = s.string().toString();
    sig = Buffer.from(s.string());
  } catch (e) {
    throw new Error(
      (e as Error).message === 'key' ? 'signed with a key that is not Ed25519' : 'a damaged SSH signature',
    );
  }
  if (namespace !== RELEASE_SIGNATURE_NAMESPACE)
    throw new Error(
      `signed for "${namespace}", not for ${RELEASE_SIGNATURE_NAMESPACE} (ssh-keygen -Y sign -n ${RELEASE_SIGNATURE_NAMESPACE})`,
    );
  if (hashAlg !== 'sha512' && hashAlg !== 'sha256') throw new Error(`unknown hash algorithm ${hashAlg}`);
  if (sigType !== 'ssh-ed25519' || sig.length !== 64) throw new Error('a damaged SSH signature');
  const signer = trusted.find((t) => t.key.equals(publicKey));
  if (!signer) throw new Error('signed by a key that is not among the trusted release keys');
  const signed = Buffer.concat([
    MAGIC,
    sshString(Buffer.from(namespace)),
    sshString(reserved),
    sshString(Buffer.from(hashAlg)),
    sshString(createHash(hashAlg).update(message).digest()),
  ]);
  const key = createPublicKey({
    key: { kty: 'OKP', crv: 'Ed25519', x: publicKey.toString('base64url') },
    format: 'jwk',
  });
  if (!verify(null, signed, key, sig)) throw new Error('the signature does not match the file (altered after signing)');
  return signer.comment;
}
