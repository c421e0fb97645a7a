// Where commands write: results to stdout, progress and diagnostics to stderr. Every write passes
// the one redaction (model/redact.ts: every credential kms-sync knows, by value and by shape) and
// the line guard (model/printable.ts: no line starts a GitHub workflow command, no stray escape
// sequence). Workflow commands kms-sync means to give are written with workflowCommand.
import { guardOutput } from '../model/printable.js';
import { redactCredentials } from '../model/redact.js';
import { isCi as isCiEnv } from '../secrets/ci-local-store.js';

export function redact(text: string): string {
  return guardOutput(redactCredentials(text));
}

/** A CI job (CI set, and not to 0 or false): no terminal drawing, timestamps on log lines. One rule with the local-store guard. */
export function isCi(env: NodeJS.ProcessEnv = process.env): boolean {
  return isCiEnv(env);
}

/**
 * Streams whose reader is gone (EPIPE: `apply | tee log` after tee died, `| head`; EIO: a closed
 * terminal): never written again. Without an 'error' listener such a write crashes the process
 * with "Unhandled 'error' event", whatever it was doing (a key on its way to its store included).
 */
const dead = { stdout: false, stderr: false };
let onClosed: ((stream: 'stdout' | 'stderr', code: string) => void) | undefined;

/** Installs the 'error' listeners on stdout and stderr (once, first thing); `closed` hears of a stream that died. */
export function guardStreams(closed: (stream: 'stdout' | 'stderr', code: string) => void): void {
  if (onClosed) return;
  onClosed = closed;
  for (const name of ['stdout', 'stderr'] as const) {
    process[name].on('error', (e: NodeJS.ErrnoException) => {
      if (dead[name]) return;
      dead[name] = true;
      onClosed?.(name, e.code ?? 'error');
    });
  }
}

/** Whether a stream can still be written (its reader has not gone). */
export const alive = (stream: 'stdout' | 'stderr') => !dead[stream];

export const out = (text: string) => {
  if (!dead.stdout) process.stdout.write(redact(text));
};
export const err = (text: string) => {
  if (!dead.stderr) process.stderr.write(redact(text));
};

/**
 * A GitHub workflow command kms-sync gives on purpose (`::warning title=…::message`), on stderr:
 * the message is redacted and escaped the way the runner expects (%, CR, LF), properties too.
 */
export function workflowCommand(command: string, message: string, properties: Record<string, string> = {}): void {
  const data = (s: string) => s.replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
  const prop = (s: string) => data(s).replace(/::/g, '%3A%3A').replace(/,/g, '%2C');
  const props = Object.entries(properties).map(([k, v]) => `${k}=${prop(redactCredentials(v))}`).join(',');
  process.stderr.write(`::${command}${props ? ` ${props}` : ''}::${data(redactCredentials(message))}\n`);
}
