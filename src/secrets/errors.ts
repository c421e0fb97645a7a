/**
 * The error every secret backend and the journal throw. Its message never contains a secret
 * value: messages are built from names, paths and codes only, and anything shaped like a customer
 * key or an age secret key is redacted as a last line of defence.
 */
import { redactCredentials } from '../model/redact.js';

export type SecretStoreErrorCode =
  | 'UNKNOWN_SCHEME'
  | 'INVALID_URI'
  | 'INVALID_ARGUMENT'
  | 'NOT_WRITABLE'
  | 'LOCKED'
  | 'IO'
  | 'PARSE'
  | 'INTEGRITY'
  | 'NO_IDENTITY'
  | 'DECRYPT'
  | 'UNSUPPORTED'
  | 'VERIFY_FAILED'
  | 'CONFLICT'
  | 'NEW_RECIPIENT'
  | 'POLICY';

/**
 * Anything shaped like a customer key (`kmsc_` + base64url), an age secret key or a token, and
 * every credential value kms-sync knows (model/redact.ts), is replaced before it can be shown.
 */
export function redactSecrets(text: string): string {
  return redactCredentials(text);
}

export interface SecretStoreErrorOptions {
  code: SecretStoreErrorCode;
  /** displayUri of the store (or journal path) concerned, if any. */
  store?: string;
  /** Only errors whose message is known not to carry secret values (fs, parse codes) may be attached. */
  cause?: unknown;
}

/** Thrown by every backend. Its message never contains a secret value. */
export class SecretStoreError extends Error {
  readonly code: SecretStoreErrorCode;
  readonly store: string | undefined;

  constructor(message: string, options: SecretStoreErrorOptions) {
    super(redactSecrets(message), options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'SecretStoreError';
    this.code = options.code;
    this.store = options.store;
  }
}

/** Turns an fs / system error into a short, value-free description. */
export function describeIoError(err: unknown): string {
  if (err && typeof err === 'object') {
    const e = err as { code?: unknown; syscall?: unknown; message?: unknown };
    if (typeof e.code === 'string' && typeof e.syscall === 'string') return `${e.syscall} failed: ${e.code}`;
    if (typeof e.code === 'string') return e.code;
    if (typeof e.message === 'string') return redactSecrets(e.message);
  }
  return 'unknown error';
}
