// Where commands write: results to stdout, progress and diagnostics to stderr. Every line passes a
// last redaction of anything shaped like a raw customer key or a project key.
import { isCi as isCiEnv } from '../secrets/ci-local-store.js';
import { redactSecrets } from '../secrets/errors.js';

const PROJECT_KEY = /\bsk_(live|test)_[A-Za-z0-9._-]{4,}/g;

export function redact(text: string): string {
  return redactSecrets(text).replace(PROJECT_KEY, (m) => `${m.slice(0, 8)}…[redacted]`);
}

/** A CI job (CI set, and not to 0 or false): no terminal drawing, timestamps on log lines. One rule with the local-store guard. */
export function isCi(env: NodeJS.ProcessEnv = process.env): boolean {
  return isCiEnv(env);
}

export const out = (text: string) => process.stdout.write(redact(text));
export const err = (text: string) => process.stderr.write(redact(text));
