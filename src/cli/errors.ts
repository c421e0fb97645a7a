import { EXIT } from './exit-codes.js';

/** Bad input or environment: a clear message, exit 1, nothing written. */
export class UsageError extends Error {
  readonly exitCode: number = EXIT.error;
}

/** Ends a command with a given exit code after its output was written. */
export class ExitWith extends Error {
  readonly exitCode: number;
  constructor(exitCode: number, message = '') {
    super(message);
    this.exitCode = exitCode;
  }
}
