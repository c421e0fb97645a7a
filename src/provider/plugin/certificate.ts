// The throw-away server certificate of go-plugin's AutoMTLS: a self-signed ECDSA P-256
// certificate for `localhost`, made fresh by every provider process.
//
// Written as plain DER (RFC 5280) instead of through an X.509 library: the structure is fixed and
// small, and the libraries cost ~200 ms of import time on every start of the provider, which
// Terraform does several times per command. Node parses the result with X509Certificate and the
// tests have OpenSSL verify it.
import { generateKeyPairSync, randomBytes, sign } from 'node:crypto';

export interface ServerCertificate {
  /** DER of the certificate: goes base64 (no padding) into the handshake line. */
  der: Buffer;
  certPem: string;
  keyPem: string;
}

// ---------------------------------------------------------------- DER writer (just what a certificate needs)
function length(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v >>= 8) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}
const tlv = (tag: number, ...content: Buffer[]) => {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), length(body.length), body]);
};
const seq = (...items: Buffer[]) => tlv(0x30, ...items);
const set = (...items: Buffer[]) => tlv(0x31, ...items);
const explicit = (n: number, inner: Buffer) => tlv(0xa0 + n, inner);
const octets = (b: Buffer) => tlv(0x04, b);
const bits = (b: Buffer, unused = 0) => tlv(0x03, Buffer.from([unused]), b);
const bool = (v: boolean) => tlv(0x01, Buffer.from([v ? 0xff : 0x00]));
const utf8 = (s: string) => tlv(0x0c, Buffer.from(s, 'utf8'));
/** A non-negative INTEGER from big-endian bytes (a leading zero keeps it positive). */
const uint = (b: Buffer) => tlv(0x02, b[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), b]) : b);

function oid(dotted: string): Buffer {
  const [a, b, ...rest] = dotted.split('.').map(Number) as [number, number, ...number[]];
  const out = [40 * a + b];
  for (const n of rest) {
    const groups: number[] = [];
    for (let v = n; ; v = Math.floor(v / 128)) {
      groups.unshift(v % 128);
      if (v < 128) break;
    }
    out.push(...groups.map((g, i) => (i < groups.length - 1 ? g | 0x80 : g)));
  }
  return tlv(0x06, Buffer.from(out));
}

/** UTCTime (years 1950–2049), which is what RFC 5280 asks for in that range. */
function utcTime(d: Date): Buffer {
  const two = (n: number) => String(n).padStart(2, '0');
  const s = `${two(d.getUTCFullYear() % 100)}${two(d.getUTCMonth() + 1)}${two(d.getUTCDate())}${two(d.getUTCHours())}${two(d.getUTCMinutes())}${two(d.getUTCSeconds())}Z`;
  return tlv(0x17, Buffer.from(s, 'ascii'));
}

const OID = {
  ecdsaWithSha256: '1.2.840.10045.4.3.2',
  commonName: '2.5.4.3',
  subjectAltName: '2.5.29.17',
  keyUsage: '2.5.29.15',
  basicConstraints: '2.5.29.19',
  extKeyUsage: '2.5.29.37',
  serverAuth: '1.3.6.1.5.5.7.3.1',
  clientAuth: '1.3.6.1.5.5.7.3.2',
};

const extension = (id: string, critical: boolean, value: Buffer) =>
  seq(oid(id), ...(critical ? [bool(true)] : []), octets(value));

/**
 * A certificate valid from 30 s ago (clock skew) for `days`, for the DNS name the host checks
 * (`localhost`). It is its own CA: the host trusts exactly this certificate, from the handshake.
 */
export function makeServerCertificate(now = new Date(), days = 30): ServerCertificate {
  const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const name = seq(set(seq(oid(OID.commonName), utf8('localhost'))));
  const algorithm = seq(oid(OID.ecdsaWithSha256));
  // Positive and minimally encoded: a first byte of 0x40-0x7f never needs (nor allows) a
  // leading zero. (Only clearing the top bit gave a 00 first byte 1 time in 128, a non-minimal
  // INTEGER that OpenSSL rejects as "illegal padding": 1 start in ~256 failed.)
  const serial = randomBytes(16);
  serial[0] = (serial[0]! & 0x3f) | 0x40;
  const tbs = seq(
    explicit(0, tlv(0x02, Buffer.from([2]))), // version 3
    uint(serial),
    algorithm,
    name,
    seq(utcTime(new Date(now.getTime() - 30_000)), utcTime(new Date(now.getTime() + days * 86_400_000))),
    name,
    publicKey.export({ type: 'spki', format: 'der' }),
    explicit(
      3,
      seq(
        extension(OID.subjectAltName, false, seq(tlv(0x82, Buffer.from('localhost', 'ascii')))),
        // digitalSignature (bit 0) and keyCertSign (bit 5): 1000 0100, 2 unused bits.
        extension(OID.keyUsage, true, bits(Buffer.from([0x84]), 2)),
        extension(OID.basicConstraints, true, seq(bool(true))),
        extension(OID.extKeyUsage, false, seq(oid(OID.serverAuth), oid(OID.clientAuth))),
      ),
    ),
  );
  const signature = sign('sha256', tbs, privateKey); // ECDSA-Sig-Value, DER
  const der = seq(tbs, algorithm, bits(signature));
  const b64 = der.toString('base64').replace(/.{1,64}/g, '$&\n');
  return {
    der,
    certPem: `-----BEGIN CERTIFICATE-----\n${b64}-----END CERTIFICATE-----\n`,
    keyPem: privateKey.export({ type: 'pkcs8', format: 'pem' }) as string,
  };
}
