/**
 * age identities and recipients, found the way SOPS finds them:
 *   - `SOPS_AGE_KEY`: identities in the environment (one per line, `#` comments allowed);
 *   - `SOPS_AGE_KEY_FILE`, else `$XDG_CONFIG_HOME/sops/age/keys.txt`, else `~/.config/sops/age/keys.txt`.
 * When a key is needed for encryption and none exists, an X25519 identity is generated at the key
 * file path (file 0600, new directories 0700) in age-keygen's format, and a notice is returned for
 * the CLI to print. The secret identity is never printed, logged or put in an error message.
 */
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import { registerSecret } from '../model/redact.js';
import { SecretStoreError, describeIoError } from './errors.js';
import { FILE_MODE, ensureDir, fsyncDir } from './fsutil.js';

export interface AgeKeyOptions {
  /** Default: process.env. */
  env?: NodeJS.ProcessEnv;
  /** Extra recipients (`age1…`) every encryption is also wrapped for (team / cluster keys). */
  recipients?: string[];
  /** Receives human notices, e.g. that a new identity was created and must be backed up. */
  onNotice?: (message: string) => void;
}

export interface AgeIdentitySet {
  /** `AGE-SECRET-KEY-1…` strings. Never log these. */
  identities: string[];
  /** Where identities were looked for / found, for error messages (paths and env var names only). */
  sources: string[];
}

/** age-encryption (and the curve code under it) is loaded on first use: `validate` never needs it. */
let ageModule: Promise<typeof import('age-encryption')> | undefined;
const age = () => (ageModule ??= import('age-encryption'));

/** BIP 173 bech32 checksum (what age recipients carry), so a recipient can be checked without loading age. */
function bech32Valid(s: string): boolean {
  const sep = s.lastIndexOf('1');
  if (sep < 1 || s.length - sep < 7) return false;
  const CHARSET = 'qpzry9x8gf2tvdw0s3jn54khce6mua7l';
  const hrp = s.slice(0, sep);
  const data: number[] = [];
  for (const ch of s.slice(sep + 1)) {
    const v = CHARSET.indexOf(ch);
    if (v < 0) return false;
    data.push(v);
  }
  const values = [
    ...[...hrp].map((c) => c.charCodeAt(0) >> 5),
    0,
    ...[...hrp].map((c) => c.charCodeAt(0) & 31),
    ...data,
  ];
  const GEN = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3];
  let chk = 1;
  for (const v of values) {
    const top = chk >>> 25;
    chk = ((chk & 0x1ffffff) << 5) ^ v;
    for (let i = 0; i < 5; i++) if ((top >>> i) & 1) chk ^= GEN[i]!;
  }
  return chk === 1;
}

const X25519_RECIPIENT_RE = /^age1[02-9ac-hj-np-z]{58}$/;
const IDENTITY_PREFIXES = ['AGE-SECRET-KEY-1', 'AGE-SECRET-KEY-PQ-1'];

/** Throws unless `r` is an X25519 age recipient (what SOPS handles natively; `age1…1…` are plugins there). */
export function validateRecipient(r: string): string {
  const trimmed = r.trim();
  if (!X25519_RECIPIENT_RE.test(trimmed)) {
    throw new SecretStoreError(
      `invalid age recipient '${trimmed}': expected an X25519 recipient 'age1…' (62 characters)`,
      { code: 'INVALID_ARGUMENT' },
    );
  }
  if (!bech32Valid(trimmed)) {
    throw new SecretStoreError(`invalid age recipient '${trimmed}': bad checksum or encoding`, {
      code: 'INVALID_ARGUMENT',
    });
  }
  return trimmed;
}

/** The key file SOPS would read: `$SOPS_AGE_KEY_FILE`, else `$XDG_CONFIG_HOME/sops/age/keys.txt`, else `~/.config/...`. */
export function defaultAgeKeyFile(env: NodeJS.ProcessEnv = process.env): string {
  const explicit = env.SOPS_AGE_KEY_FILE;
  if (explicit) return path.resolve(explicit);
  const xdg = env.XDG_CONFIG_HOME;
  const configDir = xdg && path.isAbsolute(xdg) ? xdg : path.join(env.HOME || os.homedir(), '.config');
  return path.join(configDir, 'sops', 'age', 'keys.txt');
}

/** Parses an identity file's text (age-keygen format). Errors name the source and line, never the content. */
export async function parseIdentities(text: string, source: string): Promise<string[]> {
  const { Decrypter } = await age();
  const out: string[] = [];
  const lines = text.split(/\r?\n/);
  lines.forEach((raw, i) => {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) return;
    if (!IDENTITY_PREFIXES.some((p) => line.startsWith(p))) {
      throw new SecretStoreError(`${source}, line ${i + 1}: not an age identity (expected AGE-SECRET-KEY-1…)`, {
        code: 'NO_IDENTITY',
      });
    }
    try {
      new Decrypter().addIdentity(line);
    } catch {
      throw new SecretStoreError(`${source}, line ${i + 1}: malformed age identity`, { code: 'NO_IDENTITY' });
    }
    out.push(line);
    registerSecret(line, 'age identity'); // redacted by value from here on (model/redact.ts)
  });
  return out;
}

export interface CreatedIdentity {
  path: string;
  recipient: string;
  notice: string;
}

/**
 * Loads, and on demand creates, the local age identity, and knows the recipients to encrypt to.
 * One instance can be shared by the store and the journal so a new identity is created once.
 */
export class AgeKeys {
  readonly env: NodeJS.ProcessEnv;
  readonly keyFile: string;
  readonly extraRecipients: string[];
  private readonly onNotice: ((message: string) => void) | undefined;
  private loaded: Promise<AgeIdentitySet> | undefined;
  private created: CreatedIdentity | undefined;
  private recipientOf: { identity: string; recipient: string } | undefined;

  constructor(opts: AgeKeyOptions = {}) {
    this.env = opts.env ?? process.env;
    this.keyFile = defaultAgeKeyFile(this.env);
    this.extraRecipients = (opts.recipients ?? []).map(validateRecipient);
    this.onNotice = opts.onNotice;
  }

  /** The identity created by this instance, if it created one (its notice was also sent to onNotice). */
  get createdIdentity(): CreatedIdentity | undefined {
    return this.created;
  }

  /** Identities for decryption. Never creates a key file. */
  async identities(): Promise<AgeIdentitySet> {
    this.loaded ??= this.load().catch((err: unknown) => {
      this.loaded = undefined;
      throw err;
    });
    return this.loaded;
  }

  /** Identities, or a clear error when there are none. */
  async requireIdentities(): Promise<AgeIdentitySet> {
    const set = await this.identities();
    if (set.identities.length === 0) {
      throw new SecretStoreError(
        `no age identity found (looked in ${set.sources.join(', ')}); set SOPS_AGE_KEY_FILE or SOPS_AGE_KEY`,
        { code: 'NO_IDENTITY' },
      );
    }
    return set;
  }

  /**
   * Recipients for encryption: the local identity's (the first X25519 identity found, from
   * SOPS_AGE_KEY, else the key file; created on first use when there is none) plus the configured
   * extra recipients, de-duplicated, in a stable order. Other identities in the key file (other
   * projects' keys) are used for decryption only.
   */
  async recipients(): Promise<string[]> {
    return this.recipientsWith(this.extraRecipients);
  }

  /** The local identity's recipient plus `extra` (one store's own recipients), de-duplicated. */
  async recipientsWith(extra: readonly string[]): Promise<string[]> {
    let set = await this.identities();
    if (set.identities.length === 0) {
      await this.createIdentity();
      this.loaded = undefined;
      set = await this.identities();
    }
    // Post-quantum identities are used for decryption only: SOPS cannot use their recipients.
    const primary = set.identities.find((id) => id.startsWith('AGE-SECRET-KEY-1'));
    if (primary === undefined) {
      throw new SecretStoreError('no X25519 age identity available to encrypt to', { code: 'NO_IDENTITY' });
    }
    // The recipient of an identity costs a scalar multiplication: computed once per identity.
    if (this.recipientOf?.identity !== primary)
      this.recipientOf = { identity: primary, recipient: await (await age()).identityToRecipient(primary) };
    return [...new Set([this.recipientOf.recipient, ...extra])];
  }

  private async load(): Promise<AgeIdentitySet> {
    const identities: string[] = [];
    const sources: string[] = [];
    const inline = this.env.SOPS_AGE_KEY;
    sources.push('SOPS_AGE_KEY');
    if (inline && inline.trim() !== '') identities.push(...(await parseIdentities(inline, 'SOPS_AGE_KEY')));
    sources.push(this.keyFile);
    let text: string | undefined;
    try {
      text = await fs.readFile(this.keyFile, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
        throw new SecretStoreError(`cannot read age key file ${this.keyFile}: ${describeIoError(err)}`, {
          code: 'NO_IDENTITY',
        });
      }
    }
    if (text !== undefined) identities.push(...(await parseIdentities(text, this.keyFile)));
    return { identities: [...new Set(identities)], sources };
  }

  /** Generates an X25519 identity at `keyFile` unless one appeared there meanwhile. */
  private async createIdentity(): Promise<void> {
    const { generateX25519Identity, identityToRecipient } = await age();
    const identity = await generateX25519Identity();
    const recipient = await identityToRecipient(identity);
    const created = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
    const content = `# created: ${created}\n# public key: ${recipient}\n${identity}\n`;
    const dir = path.dirname(this.keyFile);
    try {
      await ensureDir(dir);
      // Write a private temp file, then link it into place: never clobbers a key file that another
      // process created meanwhile, and the key file is never seen half-written.
      const tmp = path.join(dir, `.keys.txt.tmp-${process.pid}-${randomBytes(6).toString('hex')}`);
      await fs.writeFile(tmp, content, { mode: FILE_MODE, flag: 'wx' });
      try {
        const fh = await fs.open(tmp, 'r+');
        try {
          await fh.sync();
        } finally {
          await fh.close();
        }
        await fs.link(tmp, this.keyFile);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'EEXIST') return; // someone else created one: use theirs
        throw err;
      } finally {
        await fs.unlink(tmp).catch(() => undefined);
      }
      await fs.chmod(this.keyFile, FILE_MODE);
      await fsyncDir(dir);
    } catch (err) {
      if (err instanceof SecretStoreError) throw err;
      throw new SecretStoreError(`cannot create age key file ${this.keyFile}: ${describeIoError(err)}`, {
        code: 'NO_IDENTITY',
      });
    }
    const notice =
      `Created a new age identity in ${this.keyFile} (public key ${recipient}). ` +
      `Back this file up: without it the secrets cannot be decrypted.`;
    this.created = { path: this.keyFile, recipient, notice };
    this.onNotice?.(notice);
  }
}

/** Encrypts `data` to every recipient in one age file (binary). */
export async function ageEncrypt(data: Uint8Array, recipients: string[]): Promise<Uint8Array> {
  const { Encrypter } = await age();
  const e = new Encrypter();
  for (const r of recipients) e.addRecipient(r);
  return e.encrypt(data);
}

/** Encrypts `data` to a single recipient and returns the ASCII-armored age file, as SOPS stores it. */
export async function ageEncryptArmored(data: Uint8Array, recipient: string): Promise<string> {
  const { armor } = await age();
  return armor.encode(await ageEncrypt(data, [recipient]));
}

/** Decrypts a binary or armored age file with any of the identities; returns undefined when none matches. */
export async function ageDecrypt(file: Uint8Array | string, identities: string[]): Promise<Uint8Array | undefined> {
  const { Decrypter, armor } = await age();
  const bin = typeof file === 'string' ? armor.decode(file) : file;
  const d = new Decrypter();
  for (const id of identities) d.addIdentity(id);
  try {
    return await d.decrypt(bin);
  } catch (err) {
    if (err instanceof Error && /no identity matched/i.test(err.message)) return undefined;
    throw err;
  }
}
