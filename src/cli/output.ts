// Where commands write: results to stdout, progress and diagnostics to stderr. Every write passes
// the one redaction (model/redact.ts: every credential kms-sync knows, by value and by shape) and
// the line guard (model/printable.ts: no line starts a GitHub workflow command, no stray escape
// sequence). Workflow commands kms-sync means to give are written with workflowCommand.
import { writeSync } from 'node:fs';
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

function died(name: 'stdout' | 'stderr', code: string): void {
  if (dead[name]) return;
  dead[name] = true;
  onClosed?.(name, code);
}

/** Installs the 'error' listeners on stdout and stderr (once, first thing); `closed` hears of a stream that died. */
export function guardStreams(closed: (stream: 'stdout' | 'stderr', code: string) => void): void {
  if (onClosed) return;
  onClosed = closed;
  for (const name of ['stdout', 'stderr'] as const) {
    process[name].on('error', (e: NodeJS.ErrnoException) => died(name, e.code ?? 'error'));
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
 * A run's closing lines (its summary): to stdout, or to stderr once stdout's reader is gone, so
 * that `kms-sync apply | tee apply.log` interrupted by Ctrl-C (which ends tee too) still shows
 * what was done. A stream write learns of a dead pipe only after the fact (its 'error' event), so
 * the first of these lines is written synchronously to find out before the summary is lost.
 */
export function outLast(text: string): void {
  if (dead.stdout) {
    err(text);
    return;
  }
  const fd = (process.stdout as { fd?: unknown }).fd;
  if (typeof fd !== 'number' || process.stdout.writableLength > 0) {
    out(text);
    return;
  }
  const data = Buffer.from(redact(text));
  let at = 0;
  try {
    while (at < data.length) at += writeSync(fd, data, at);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? 'error';
    // A non-blocking pipe that is full: the stream writes the rest when the reader catches up.
    if (code === 'EAGAIN') return void process.stdout.write(data.subarray(at));
    died('stdout', code);
    err(text);
  }
}

/**
 * A GitHub workflow command kms-sync gives on purpose (`::warning title=…::message`), on stderr:
 * the message is redacted and escaped the way the runner expects (%, CR, LF), properties too.
 */
export function workflowCommand(command: string, message: string, properties: Record<string, string> = {}): void {
  const data = (s: string) => s.replace(/%/g, '%25').replace(/\r/g, '%0D').replace(/\n/g, '%0A');
  const prop = (s: string) => data(s).replace(/::/g, '%3A%3A').replace(/,/g, '%2C');
  const props = Object.entries(properties)
    .map(([k, v]) => `${k}=${prop(redactCredentials(v))}`)
    .join(',');
  process.stderr.write(`::${command}${props ? ` ${props}` : ''}::${data(redactCredentials(message))}\n`);
}
