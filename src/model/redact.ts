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
  'KMS_API_KEY', 'KMS_EMULATOR_API_KEY', 'KMS_EMULATOR_API_KEYS',
  'GITHUB_TOKEN', 'GH_TOKEN', 'GH_ENTERPRISE_TOKEN', 'GITHUB_ENTERPRISE_TOKEN', 'ACTIONS_RUNTIME_TOKEN', 'ACTIONS_ID_TOKEN_REQUEST_TOKEN',
  'GITLAB_TOKEN', 'CI_JOB_TOKEN', 'CI_JOB_JWT', 'CI_JOB_JWT_V1', 'CI_JOB_JWT_V2', 'CI_REGISTRY_PASSWORD', 'CI_DEPLOY_PASSWORD',
  'VAULT_TOKEN', 'VAULT_SECRET_ID',
  'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN', 'AWS_SECURITY_TOKEN', 'AWS_WEB_IDENTITY_TOKEN',
  'AZURE_CLIENT_SECRET', 'AZURE_CLIENT_CERTIFICATE_PASSWORD', 'AZURE_STORAGE_KEY', 'AZURE_STORAGE_CONNECTION_STRING', 'AZURE_FEDERATED_TOKEN',
  'GOOGLE_CREDENTIALS', 'GOOGLE_OAUTH_ACCESS_TOKEN', 'CLOUDSDK_AUTH_ACCESS_TOKEN',
  'SOPS_AGE_KEY', 'AGE_IDENTITY', 'NPM_TOKEN', 'NODE_AUTH_TOKEN',
]);

/** Name parts that mark a credential variable (`*_TOKEN`, `*_SECRET*`, `*_PASSWORD`, `*_KEY`, …). */
const CREDENTIAL_PART = /^(TOKENS?|SECRETS?|PASSWORDS?|PASSWD|PASS|PASSPHRASE|KEYS?|APIKEY|PRIVATE|CREDENTIALS?|CREDS|AUTH|SESSION|COOKIE|JWT|DSN|WEBHOOK|SAS|SIGNATURE|CONNECTION)$/;
/** Name endings that make a matching name safe: it holds a path, an id, an address or a name, not the secret. */
const SAFE_SUFFIX = /_(FILE|PATH|DIR|ID|URL|ADDR|NAME|REGION|TYPE)$/;

/**
 * Whether an environment variable holds a credential, by name: the known names, then any name with
 * a part such as TOKEN, SECRET, PASSWORD or KEY (split on `_`) unless it ends in a safe suffix
 * (`_FILE`, `_PATH`, `_ID`, `_URL`, …: `AWS_ACCESS_KEY_ID`, `SOPS_AGE_KEY_FILE`).
 */
export function isCredentialEnvName(name: string): boolean {
  const upper = name.toUpperCase();
  if (CREDENTIAL_NAMES.has(upper)) return true;
  if (SAFE_SUFFIX.test(upper)) return false;
  return upper.split(/_+/).some((part) => CREDENTIAL_PART.test(part));
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

const registered = new Map<string, string>();

/** Adds a value read at run time (an identity from a file, a token from a file) to those redacted. */
export function registerSecret(value: string, label = 'secret'): void {
  for (const piece of pieces(value)) registered.set(piece, label);
}

/** The value, and each of its lines and its escaped forms: what can appear in text. */
function pieces(value: string): string[] {
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

/** Credential values found in the environment, each with the variable it came from (longest first). */
export function credentialValues(env: NodeJS.ProcessEnv = process.env): [value: string, label: string][] {
  const found = new Map<string, string>(registered);
  for (const [name, value] of Object.entries(env)) {
    if (!value) continue;
    if (isCredentialEnvName(name)) for (const p of pieces(value)) if (!found.has(p)) found.set(p, name);
    // A URL with a password (KMS_API_URL, VAULT_ADDR, a proxy): the password is a credential.
    if (value.includes('@') && /^[a-z][a-z0-9+.-]*:\/\//i.test(value)) {
      try {
        const u = new URL(value);
        if (u.password) for (const p of pieces(decodeURIComponent(u.password))) if (!found.has(p)) found.set(p, name);
      } catch {
        // not a URL
      }
    }
  }
  return [...found].sort((a, b) => b[0].length - a[0].length);
}

/** Whether the text holds a known credential value or anything shaped like one. */
export function holdsCredential(text: string, env: NodeJS.ProcessEnv = process.env): boolean {
  if (SHAPES.some(([re]) => new RegExp(re.source).test(text))) return true;
  return credentialValues(env).some(([v]) => text.includes(v));
}

/** The text with every known credential value and every credential-shaped string replaced. */
export function redactCredentials(text: string, env: NodeJS.ProcessEnv = process.env): string {
  let s = text;
  for (const [value, label] of credentialValues(env)) if (s.includes(value)) s = s.split(value).join(`[REDACTED ${label}]`);
  for (const [re, by] of SHAPES) s = s.replace(re, by);
  return s;
}
