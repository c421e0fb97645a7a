// Opens libsodium sealed boxes (crypto_box_seal) with the noble libraries: an implementation
// independent of the libsodium build the GitHub backend seals with, from npm, so the interop
// check runs on every machine. The construction, from libsodium's documentation:
//   sealed = epk ‖ crypto_box(m, nonce = BLAKE2b-192(epk ‖ pk), epk, sk_recipient)
//   crypto_box key = HSalsa20(X25519(sk, epk), 0¹⁶); the box is XSalsa20-Poly1305 (tag first).
import { secretbox, hsalsa } from '@noble/ciphers/salsa.js';
import { x25519 } from '@noble/curves/ed25519.js';
import { blake2b } from '@noble/hashes/blake2.js';

// "expand 32-byte k" as little-endian words: Salsa20's sigma constant.
const SIGMA = new Uint32Array(new Uint8Array(Buffer.from('expand 32-byte k', 'latin1')).buffer);

function words(bytes: Uint8Array): Uint32Array {
  return new Uint32Array(Uint8Array.from(bytes).buffer);
}

/** crypto_box_beforenm: the shared XSalsa20-Poly1305 key of a secret key and a peer's public key. */
function boxKey(secretKey: Uint8Array, peerPublic: Uint8Array): Uint8Array {
  const shared = x25519.getSharedSecret(secretKey, peerPublic);
  const out = new Uint32Array(8);
  hsalsa(SIGMA, words(shared), new Uint32Array(4), out);
  return new Uint8Array(out.buffer);
}

/** The plaintext of a base64 sealed box, opened with a base64 X25519 secret key; throws when it does not authenticate. */
export function openSealedBox(secretKeyB64: string, sealedB64: string): string {
  const sk = new Uint8Array(Buffer.from(secretKeyB64, 'base64'));
  const sealed = new Uint8Array(Buffer.from(sealedB64, 'base64'));
  const epk = sealed.subarray(0, 32);
  const pk = x25519.getPublicKey(sk);
  const nonce = blake2b(new Uint8Array([...epk, ...pk]), { dkLen: 24 });
  return Buffer.from(secretbox(boxKey(sk, epk), nonce).open(sealed.subarray(32))).toString('utf8');
}
