// The errors a run ends with, for every front end: the CLI turns them into its exit codes, the
// agent into a failed reconcile. DESIGN.md "Plans": 0 no changes, 2 changes present, 1 error, 3
// apply stopped part-way.
export const EXIT = { ok: 0, error: 1, changes: 2, partial: 3 } as const;

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
