// The one redaction every output path uses (stdout/stderr writers, text/JSON/Markdown reports, PR
// comments, step summaries, errors, saved plans): credentials kms-sync knows are replaced *by
// value*, wherever they appear, also inside longer strings; anything *shaped* like a key is
// replaced too. The known credentials are the values of the environment variables that hold one
// (isCredentialEnvName), the passwords of URLs in the environment, and values registered at run
// time (registerSecret: an age identity read from a file, a token read from a file).

/**
 * The one redaction marker, in every output: `[REDACTED]`, or `[REDACTED what]` naming where the
 * value came from (`[REDACTED KMS_API_KEY]`); a prefix that is no secret and says what kind of
 * value it was may stay in front (`kmsc_[REDACTED]`, `sk_live_[REDACTED]`, `https://[REDACTED]@host`).
 */
export const REDACTED = '[REDACTED]';

/** A URI with its `user:password@` part replaced by the marker, so it can be quoted in a message. */
export function redactUserinfo(uri: string): string {
  return uri.replace(/^([A-Za-z][A-Za-z0-9+.-]*:\/\/)[^/@]*@/, `$1${REDACTED}@`);
}

/** Credential variables named exactly (their names do not all follow the patterns below). */
const CREDENTIAL_NAMES = new Set([
  'KMS_API_KEY',
  'KMS_EMULATOR_API_KEY',
  'KMS_EMULATOR_API_KEYS',
  'GITHUB_TOKEN',
  'GH_TOKEN',
  'GH_ENTERPRISE_TOKEN',
  'GITHUB_ENTERPRISE_TOKEN',
  'ACTIONS_RUNTIME_TOKEN',
  'ACTIONS_ID_TOKEN_REQUEST_TOKEN',
  'GITLAB_TOKEN',
  'CI_JOB_TOKEN',
  'CI_JOB_JWT',
  'CI_JOB_JWT_V1',
  'CI_JOB_JWT_V2',
  'CI_REGISTRY_PASSWORD',
  'CI_DEPLOY_PASSWORD',
  'VAULT_TOKEN',
  'VAULT_SECRET_ID',
  'AWS_SECRET_ACCESS_KEY',
  'AWS_SESSION_TOKEN',
  'AWS_SECURITY_TOKEN',
  'AWS_WEB_IDENTITY_TOKEN',
  'AZURE_CLIENT_SECRET',
  'AZURE_CLIENT_CERTIFICATE_PASSWORD',
  'AZURE_STORAGE_KEY',
  'AZURE_STORAGE_CONNECTION_STRING',
  'AZURE_FEDERATED_TOKEN',
  'GOOGLE_CREDENTIALS',
  'GOOGLE_OAUTH_ACCESS_TOKEN',
  'CLOUDSDK_AUTH_ACCESS_TOKEN',
  'SOPS_AGE_KEY',
  'AGE_IDENTITY',
  'NPM_TOKEN',
  'NODE_AUTH_TOKEN',
  'PGPASSWORD',
  'MYSQL_PWD',
  'KUBE_CONFIG_DATA',
  'SLACK_WEBHOOK_URL',
  'KMS_SYNC_NOTIFY_WEBHOOK',
  'DOCKER_AUTH_CONFIG',
]);

/** Name parts that mark a credential variable (`*_TOKEN`, `*_SECRET*`, `*_PASSWORD`, `*_KEY`, …). */
const CREDENTIAL_PART =
  /^(TOKENS?|SECRETS?|PASSWORDS?|PASSWD|PASS|PWD|PW|PAT|PASSPHRASE|KEYS?|APIKEY|PRIVATE|CREDENTIALS?|CREDS|AUTH|SESSION|COOKIE|JWT|DSN|WEBHOOK|SAS|SIGNATURE|CONNECTION)$/;
/** A part that ends in one of these is one too (`PGPASSWORD`, `GHTOKEN`). */
const CREDENTIAL_END = /(PASSWORD|PASSWD|TOKEN|SECRET|APIKEY)$/;
/** Name endings that make a matching name safe: it holds a path, an id, an address or a name, not the secret. */
const SAFE_SUFFIX = /_(FILE|PATH|DIR|ID|URL|ADDR|NAME|REGION|TYPE|CMD|SOCK)$/;
/** Variables of the shell that are never credentials, whatever their parts say. */
const NOT_CREDENTIALS = new Set(['PWD', 'OLDPWD']);
/** Variables whose value is no secret but leads to one: a key file, a socket, git's extra headers. */
const LEADS_TO_CREDENTIAL =
  /^(KUBECONFIG|GOOGLE_APPLICATION_CREDENTIALS|AZURE_CLIENT_CERTIFICATE_PATH|SSH_AUTH_SOCK|GIT_ASKPASS|SSH_ASKPASS|GIT_CONFIG_(KEY|VALUE)_\d+|GIT_CONFIG_PARAMETERS|NETRC|DOCKER_CONFIG)$/;

/**
 * The one predicate of what a credential variable is (redaction by value, git's environment, the
 * CDKTF app's environment): the known names, then any name with a part such as TOKEN, SECRET,
 * PASSWORD or KEY (split on `_`) unless it ends in a safe suffix (`_FILE`, `_PATH`, `_ID`, `_URL`,
 * …: `AWS_ACCESS_KEY_ID`, `SOPS_AGE_KEY_FILE`). Its value is redacted wherever it appears.
 */
export function isCredentialEnvName(name: string): boolean {
  const upper = name.toUpperCase();
  if (CREDENTIAL_NAMES.has(upper)) return true;
  if (NOT_CREDENTIALS.has(upper) || SAFE_SUFFIX.test(upper)) return false;
  return hasCredentialPart(upper);
}

const hasCredentialPart = (upper: string) =>
  upper.split(/_+/).some((part) => CREDENTIAL_PART.test(part) || CREDENTIAL_END.test(part));

/**
 * Whether a variable holds a credential or leads to one (`SOPS_AGE_KEY_FILE`, `AWS_ACCESS_KEY_ID`,
 * `KUBECONFIG`, `GIT_CONFIG_VALUE_0`): what a child process that runs code kms-sync does not
 * trust (the CDKTF app) must not get. Redaction only masks the first kind (a path is no secret).
 */
export function leadsToCredential(name: string): boolean {
  const upper = name.toUpperCase();
  if (isCredentialEnvName(upper) || LEADS_TO_CREDENTIAL.test(upper)) return true;
  return !NOT_CREDENTIALS.has(upper) && hasCredentialPart(upper);
}

/** Shapes of credentials, whatever variable (or service answer) they come from. */
const SHAPES: [RegExp, (m: string) => string][] = [
  [/kmsc_[A-Za-z0-9_-]{8,}/g, () => `kmsc_${REDACTED}`],
  [/\bsk_(?:live|test)_[A-Za-z0-9._-]{4,}/g, (m) => `${m.slice(0, 8)}${REDACTED}`],
  // Embedded in a longer word (`xsk_live_…`), a project key kms-sync does not hold is still one when long.
  [/sk_(?:live|test)_[A-Za-z0-9]{12,}/g, (m) => `${m.slice(0, 8)}${REDACTED}`],
  [/AGE-SECRET-KEY-(?:PQ-)?1[0-9A-Z]+/g, () => `AGE-SECRET-KEY-${REDACTED}`],
  [/\b(?:gh[pousr]_[A-Za-z0-9]{20,}|github_pat_[A-Za-z0-9_]{20,})/g, () => '[REDACTED GitHub token]'],
  [/\bglpat-[A-Za-z0-9_-]{20,}/g, () => '[REDACTED GitLab token]'],
  [/\bhv[sbr]\.[A-Za-z0-9_-]{20,}/g, () => '[REDACTED Vault token]'],
  // A PEM private key (a GCP service-account file's private_key, a client certificate's key), also JSON-escaped.
  [/-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?(?:-----END [A-Z ]*PRIVATE KEY-----|$)/g, () => '[REDACTED private key]'],
];

/** The shortest value redacted by value: shorter ones ("1", "true") would mask ordinary text. */
const MIN_SECRET_LENGTH = 8;

/**
 * Values registered at run time (an identity or a token read from a file, every raw key the moment
 * a response carries it), each spelled every way it can reach text, by their first
 * MIN_SECRET_LENGTH characters: a run that issued 20,000 keys redacts a line in one pass over
 * it, not in 20,000 searches.
 */
const registered = new Map<string, string>();
/** The values registerSecret was given (all their spellings are in `registered`). */
const registeredValues = new Set<string>();
/**
 * The lengths of the registered spellings that start with each head, longest first: a place whose
 * head matches is looked up once per length (the keys of one service have one or two lengths),
 * never compared with every spelling of that head (their hex spellings all share one).
 */
const lengthsByHead = new Map<string, number[]>();
/** headHash of each head in lengthsByHead: a line is scanned by a rolling hash, and sliced only where one matches. */
const headHashes = new Set<number>();

/** Adds a value read at run time (an identity from a file, a token from a file, a raw key) to those redacted, in all its spellings. */
export function registerSecret(value: string, label = 'secret'): void {
  if (registeredValues.has(value)) return;
  registeredValues.add(value);
  if (PLAIN.test(value)) {
    // A raw key, most tokens: its one piece and that piece's cases (spellings' TEXT kinds), without
    // building the lists (a run registers every key it issues: bench scenario 6, 2,000).
    if (value.length < MIN_SECRET_LENGTH) return;
    addRegistered(value, label);
    if (value.length >= 16) {
      addRegistered(value.toUpperCase(), label);
      addRegistered(value.toLowerCase(), label);
    }
    pendEncoded(value, label, shortestEncodedOf(value.length));
    return;
  }
  for (const piece of spellings(value, TEXT)) addRegistered(piece, label);
  // Its hex and base64 spellings when a text could hold one (settleEncoded): a run that issued
  // thousands of keys and printed lines of names spells none of them.
  const shortest = shortestEncoded(value);
  if (shortest !== undefined) pendEncoded(value, label, shortest);
}

/** A value whose encoded spellings settleEncoded registers once a text could hold the shortest of them. */
function pendEncoded(value: string, label: string, shortest: number): void {
  pendingEncoded.push([value, label]);
  if (shortest < pendingShortest) pendingShortest = shortest;
}

function addRegistered(piece: string, label: string): void {
  if (registered.has(piece)) return;
  registered.set(piece, label);
  const head = piece.slice(0, MIN_SECRET_LENGTH);
  const lengths = lengthsByHead.get(head);
  if (!lengths) {
    lengthsByHead.set(head, [piece.length]);
    headHashes.add(headHash(head, 0));
  } else if (!lengths.includes(piece.length)) {
    lengths.push(piece.length);
    lengths.sort((a, b) => b - a);
  }
}

/** Registered values whose encoded spellings are not registered yet, and the length of the shortest of those spellings. */
const pendingEncoded: [value: string, label: string][] = [];
let pendingShortest = Number.POSITIVE_INFINITY;

/**
 * The encoded spellings of the values registered since the last call, registered now when `text`
 * (undefined: whatever text) has a run of base64, base64url or hex characters as long as the
 * shortest of them: every encoded spelling is such a run, so a text without one holds none.
 */
function settleEncoded(text?: string): void {
  if (pendingEncoded.length === 0) return;
  if (text !== undefined && !hasEncodedRun(text, pendingShortest)) return;
  for (const [value, label] of pendingEncoded) for (const s of spellings(value, ENCODED)) addRegistered(s, label);
  pendingEncoded.length = 0;
  pendingShortest = Number.POSITIVE_INFINITY;
}

/** A character of base64 (`A-Za-z0-9+/=`), base64url (`-_`) or hex. */
const encodedChar = (c: number) =>
  (c >= 0x30 && c <= 0x39) ||
  (c >= 0x41 && c <= 0x5a) ||
  (c >= 0x61 && c <= 0x7a) ||
  c === 0x2b ||
  c === 0x2f ||
  c === 0x3d ||
  c === 0x2d ||
  c === 0x5f;

/** Whether `text` has `length` encodedChar characters in a row. */
function hasEncodedRun(text: string, length: number): boolean {
  let run = 0;
  for (let i = 0; i < text.length; i++) {
    if (!encodedChar(text.charCodeAt(i))) run = 0;
    else if (++run >= length) return true;
  }
  return false;
}

/** The length of a value's shortest encoded spelling (spellings ENCODED), undefined when it has none. */
function shortestEncoded(value: string): number | undefined {
  let shortest: number | undefined;
  for (const p of pieces(value)) {
    const at = shortestEncodedOf(Buffer.byteLength(p, 'utf8'));
    if (shortest === undefined || at < shortest) shortest = at;
  }
  return shortest;
}

/** The length of the shortest encoded spelling of a piece of `n` bytes. */
function shortestEncodedOf(n: number): number {
  // hex; base64 of whole groups at alignments 0, 1 and 2 (the shortest of the base64 forms).
  const m = Math.min(2 * n, Math.floor(n / 3) * 4, Math.floor((n + 1) / 3) * 4 - 2, Math.floor((n + 2) / 3) * 4 - 3);
  return Math.max(m, MIN_SECRET_LENGTH);
}

/** The rolling hash's base, and its power for the character that leaves the window. */
const HASH_BASE = 0x01000193;
let HASH_OUT = 1;
for (let i = 1; i < MIN_SECRET_LENGTH; i++) HASH_OUT = Math.imul(HASH_OUT, HASH_BASE);

/** A hash of the MIN_SECRET_LENGTH characters of `text` at `at` (UTF-16 units), as the rolling scan computes it. */
function headHash(text: string, at: number): number {
  let h = 0;
  for (let i = at; i < at + MIN_SECRET_LENGTH; i++) h = (Math.imul(h, HASH_BASE) + text.charCodeAt(i)) | 0;
  return h;
}

const PLAIN = /^[A-Za-z0-9_.!~*'()-]*$/;

/** The value, and each of its lines and its escaped forms: what can appear in text. */
function pieces(value: string): string[] {
  // A value of characters that neither JSON nor a URI escapes, no space, no line (a raw key, most tokens): itself alone.
  if (PLAIN.test(value)) return value.length >= MIN_SECRET_LENGTH ? [value] : [];
  const out = new Set<string>();
  const add = (v: string) => {
    const t = v.trim();
    if (t.length >= MIN_SECRET_LENGTH) out.add(t);
  };
  add(value);
  for (const line of value.split(/\r?\n/)) add(line);
  for (const v of [...out]) {
    add(JSON.stringify(v).slice(1, -1));
    add(encodeURIComponent(v));
  }
  return [...out];
}

/**
 * pieces, plus the encodings a service or a tool may echo a secret in: upper- and lower-cased,
 * hex (both cases), base64 and base64url, standalone (with and without padding) and inside a
 * longer encoded text (`Basic base64(user:token)`: the three byte alignments, the characters
 * that depend on the secret's bytes alone).
 */
function spellings(value: string, kinds: Kinds = BOTH): string[] {
  const out = new Set<string>();
  const add = (v: string) => {
    if (v.length >= MIN_SECRET_LENGTH) out.add(v);
  };
  for (const p of pieces(value)) {
    if (kinds.text) {
      add(p);
      // Other cases only for token-length values: a short one would mask ordinary words.
      if (p.length >= 16) {
        add(p.toUpperCase());
        add(p.toLowerCase());
      }
    }
    if (!kinds.encoded) continue;
    // Two zero bytes, then the value: its alignments are views of one buffer.
    const padded = Buffer.alloc(Buffer.byteLength(p, 'utf8') + 2);
    padded.write(p, 2, 'utf8');
    const bytes = padded.subarray(2);
    const hex = bytes.toString('hex');
    add(hex);
    add(hex.toUpperCase());
    for (const align of [0, 1, 2]) {
      const shifted = padded.subarray(2 - align);
      const b64 = shifted.toString('base64');
      // base64url has the same characters at the same places (no padding).
      const b64url = shifted.toString('base64url');
      // Characters of whole 3-byte groups, after the ones the alignment bytes share.
      const from = align === 0 ? 0 : align + 1;
      const to = Math.floor(shifted.length / 3) * 4;
      add(b64.slice(from, to));
      add(b64url.slice(from, to));
      if (align === 0) {
        add(b64);
        add(withoutPadding(b64));
        add(b64url);
      }
    }
  }
  return [...out];
}

/** Which spellings: the text ones (the pieces and their cases), the encoded ones (hex, base64), or both. */
interface Kinds {
  text: boolean;
  encoded: boolean;
}
const BOTH: Kinds = { text: true, encoded: true };
const TEXT: Kinds = { text: true, encoded: false };
const ENCODED: Kinds = { text: false, encoded: true };

const withoutPadding = (b64: string) =>
  b64.endsWith('==') ? b64.slice(0, -2) : b64.endsWith('=') ? b64.slice(0, -1) : b64;

/** Spellings of the environment's credential values, by value: computed once per value. */
const spelled = new Map<string, string[]>();
function spellingsOf(value: string): string[] {
  let s = spelled.get(value);
  if (!s) {
    s = spellings(value);
    if (spelled.size < 1000) spelled.set(value, s);
  }
  return s;
}

/** Credential values found in the environment and registered, each with where it came from (longest first). */
export function credentialValues(env: NodeJS.ProcessEnv = process.env): [value: string, label: string][] {
  settleEncoded();
  return [...new Map([...registered, ...environmentValues(env)])].sort((a, b) => b[0].length - a[0].length);
}

/**
 * The last environment read and what it yielded. Every call reads the whole environment again
 * (names and values: a variable set at run time is redacted from the next call on); only the
 * work done on it (which names are credentials, their spellings, the order) is reused while it
 * reads the same as last time: an output line costs one read of the environment, not a scan.
 */
let lastEnvironment: { env: NodeJS.ProcessEnv; read: string[]; values: [value: string, label: string][] } | undefined;

/** Names and values of the environment, in its order: [name, value, name, value, …]. */
function readEnvironment(env: NodeJS.ProcessEnv): string[] {
  const names = Object.keys(env);
  const read = new Array<string>(names.length * 2);
  for (let i = 0; i < names.length; i++) {
    read[2 * i] = names[i]!;
    read[2 * i + 1] = env[names[i]!] ?? '';
  }
  return read;
}

const sameStrings = (a: readonly string[], b: readonly string[]) =>
  a.length === b.length && a.every((x, i) => x === b[i]);

/**
 * Credential values once read from the process's own environment, in all their spellings: they
 * stay redacted after their variable changes or goes. A batch of output lines is redacted when it
 * is written (cli/output.ts), which may be after a variable that was set when a line was made has
 * changed; an old token is still a secret. Bounded, as a run's environment barely changes.
 */
const remembered = new Map<string, string>();
const MAX_REMEMBERED = 20_000;

/** The environment's credential values in all their spellings (longest first); registered ones are matched by redactRegistered. */
function environmentValues(env: NodeJS.ProcessEnv): readonly [value: string, label: string][] {
  const read = readEnvironment(env);
  if (lastEnvironment && lastEnvironment.env === env && sameStrings(lastEnvironment.read, read))
    return lastEnvironment.values;
  const found = new Map<string, string>();
  for (let i = 0; i < read.length; i += 2) {
    const name = read[i]!;
    const value = read[i + 1]!;
    if (!value) continue;
    if (isCredentialEnvName(name)) for (const p of spellingsOf(value)) if (!found.has(p)) found.set(p, name);
    // A URL with a password (KMS_API_URL, VAULT_ADDR, a proxy): the password is a credential.
    if (value.includes('@') && /^[a-z][a-z0-9+.-]*:\/\//i.test(value)) {
      try {
        const u = new URL(value);
        if (u.password)
          for (const p of spellingsOf(decodeURIComponent(u.password))) if (!found.has(p)) found.set(p, name);
      } catch {
        // not a URL
      }
    }
  }
  if (env === process.env) {
    for (const [spelling, name] of found)
      if (remembered.size < MAX_REMEMBERED && !remembered.has(spelling)) remembered.set(spelling, name);
    for (const [spelling, name] of remembered) if (!found.has(spelling)) found.set(spelling, name);
  }
  const values = [...found].sort((a, b) => b[0].length - a[0].length);
  lastEnvironment = { env, read, values };
  return values;
}

/** Whether the text holds a known credential value or anything shaped like one. */
export function holdsCredential(text: string, env: NodeJS.ProcessEnv = process.env): boolean {
  if (SHAPES.some(([re]) => new RegExp(re.source).test(text))) return true;
  if (environmentValues(env).some(([v]) => text.includes(v))) return true;
  return redactRegistered(text) !== text;
}

/** The text with every known credential value and every credential-shaped string replaced. */
export function redactCredentials(text: string, env: NodeJS.ProcessEnv = process.env): string {
  return redactWith(text, environmentValues(env));
}

/**
 * redactCredentials for a batch of texts written together (cli/output.ts): the environment is
 * read once, now, and `each` redacts one text as redactCredentials would; `values` redacts
 * the known values alone (no shapes), for the batch's texts joined, where a value written in two
 * pieces is whole; `untouched` says of the texts joined that `each` would change none of them.
 * Read when the batch is written, never before its texts were made: a variable set before a
 * text was made is read (or remembered, when it has gone since).
 */
export function batchRedaction(env: NodeJS.ProcessEnv = process.env): {
  each: (text: string) => string;
  values: (text: string) => string;
  untouched: (text: string) => boolean;
} {
  const values = environmentValues(env);
  return {
    each: (text) => redactWith(text, values),
    values: (text) => redactValues(text, values),
    // No known value and nothing shaped like a credential anywhere in the joined texts: `each` leaves every one as it is.
    untouched: (text) => redactValues(text, values) === text && !SHAPE_HINTS.some((re) => re.test(text)),
  };
}

/** SHAPES without their word-boundary anchors: whatever a shape matches in a piece of a text, these find in the whole. */
const SHAPE_HINTS = SHAPES.map(([re]) => new RegExp(re.source.replaceAll('\\b', '')));

function redactWith(text: string, values: readonly [value: string, label: string][]): string {
  let s = redactValues(text, values);
  for (const [re, by] of SHAPES) s = s.replace(re, by);
  return s;
}

function redactValues(text: string, values: readonly [value: string, label: string][]): string {
  let s = redactRegistered(text);
  for (const [value, label] of values) if (s.includes(value)) s = s.split(value).join(`[REDACTED ${label}]`);
  return s;
}

/**
 * Registered values replaced: one pass, a lookup of the next MIN_SECRET_LENGTH characters at each
 * place (by their rolling hash first: most places start no registered value).
 */
function redactRegistered(text: string): string {
  settleEncoded(text);
  if (registered.size === 0 || text.length < MIN_SECRET_LENGTH) return text;
  let out = '';
  let copied = 0;
  let h = headHash(text, 0);
  for (let i = 0; i + MIN_SECRET_LENGTH <= text.length; ) {
    const hit = headHashes.has(h) ? registeredAt(text, i) : undefined;
    if (hit === undefined) {
      // The window moves one character: the first leaves, the next comes in.
      if (i + MIN_SECRET_LENGTH < text.length)
        h =
          (Math.imul(h - Math.imul(text.charCodeAt(i), HASH_OUT), HASH_BASE) + text.charCodeAt(i + MIN_SECRET_LENGTH)) |
          0;
      i++;
      continue;
    }
    out += `${text.slice(copied, i)}[REDACTED ${registered.get(hit)}]`;
    i += hit.length;
    copied = i;
    if (i + MIN_SECRET_LENGTH <= text.length) h = headHash(text, i);
  }
  return copied === 0 ? text : out + text.slice(copied);
}

/** The longest registered spelling that starts at `at`, if any. */
function registeredAt(text: string, at: number): string | undefined {
  const lengths = lengthsByHead.get(text.slice(at, at + MIN_SECRET_LENGTH));
  if (!lengths) return undefined;
  for (const n of lengths) {
    if (at + n > text.length) continue;
    const candidate = text.slice(at, at + n);
    if (registered.has(candidate)) return candidate;
  }
  return undefined;
}
