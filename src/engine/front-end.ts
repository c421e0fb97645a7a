// What a run tells the front end that started it, and hears from it: notes for the user (the
// configuration's warnings, recovery), a progress line while the live state is read, and a stop
// (an interrupt before anything is written cuts the run's reads). The CLI installs its terminal's
// (cli/run.ts); the defaults write plain lines to stderr and draw nothing. The engine imports no
// front end.
import type { KmsClient } from '../api/client.js';

export interface FrontEnd {
  /** A note for the user (a whole line, with its newline): stderr, escaped and redacted by the CLI. */
  notice(text: string): void;
  /** Runs `read` with a progress line of the pages read (the CLI draws one on a terminal). */
  withProgress<T>(api: KmsClient, read: () => Promise<T>, signal?: AbortSignal): Promise<T>;
  /** Clears the progress line before other output. */
  clearProgress(): void;
  /** Calls `stop` when the run is interrupted before anything is written; returns the unsubscribe. */
  onStop(stop: () => void): () => void;
}

const plain: FrontEnd = {
  notice: (text) => {
    process.stderr.write(text);
  },
  withProgress: (_api, read) => read(),
  clearProgress: () => undefined,
  onStop: () => () => undefined,
};

let current: FrontEnd = plain;

/** The front end runs report to. */
export function frontEnd(): FrontEnd {
  return current;
}

/** Installed once by the CLI at start-up. */
export function installFrontEnd(hooks: FrontEnd): void {
  current = hooks;
}
