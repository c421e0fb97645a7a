// Where commands write: results to stdout, progress and diagnostics to stderr. Every write passes
// the one redaction (model/redact.ts: every credential kms-sync knows, by value and by shape) and
// the line guard (model/printable.ts: no line starts a GitHub workflow command, no stray escape
// sequence). Workflow commands kms-sync means to give are written with workflowCommand.
//
// Writes wait in one queue, in the order they were made, and leave together (flushOutput): at the
// end of the event loop's turn, once 64 K characters wait, before anything that writes to the
// terminal by itself (a question, a key revealed, the closing lines) and at exit, also after an
// interrupt or an uncaught error. The batch is redacted as it leaves, the environment read once
// for it (a read per line cost 10-30 µs: most of an apply's output time): its variables are
// read after every text of the batch was made, so a credential set before a text was made is
// masked, and one changed or unset since is remembered (model/redact.ts). Consecutive texts of
// one stream go out in one write, in their order, so stdout and stderr still interleave as made.
import { fstatSync, writeSync } from 'node:fs';
import { guardOutput, mayGuard } from '../model/printable.js';
import { batchRedaction, redactCredentials } from '../model/redact.js';
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

type Stream = 'stdout' | 'stderr';

/** Texts written and not yet flushed, in order; `raw` ones were redacted when made (workflow commands). */
const queue: { stream: Stream; text: string; raw: boolean }[] = [];
let queuedChars = 0;
let flushScheduled = false;
/** Flushed at once above this many characters waiting: a long synchronous listing neither waits nor grows. */
const FLUSH_AT_CHARS = 64 * 1024;

function enqueue(stream: Stream, text: string, raw = false): void {
  if (dead[stream]) return;
  queue.push({ stream, text, raw });
  queuedChars += text.length;
  if (queuedChars >= FLUSH_AT_CHARS) flushOutput();
  else if (!flushScheduled) {
    flushScheduled = true;
    setImmediate(flushOutput);
  }
}

/**
 * Writes every queued text now, each redacted and guarded as if it were written alone, with the
 * environment read once. The texts of one stream that go out together are written joined, and
 * their known values redacted again joined: a value written in two pieces is masked whole.
 */
export function flushOutput(): void {
  flushScheduled = false;
  if (queue.length === 0) return;
  const batch = queue.splice(0);
  queuedChars = 0;
  const redaction = batchRedaction();
  let stream: Stream | undefined;
  let made: string[] = [];
  let ready = '';
  const settle = () => {
    if (made.length) ready += redactRun(made, redaction);
    made = [];
  };
  const sendRun = () => {
    settle();
    if (stream !== undefined) send(stream, ready);
    ready = '';
  };
  for (const e of batch) {
    if (e.stream !== stream) {
      sendRun();
      stream = e.stream;
    }
    if (!e.raw) made.push(e.text);
    else {
      settle();
      ready += e.text;
    }
  }
  sendRun();
}

/** Texts of one stream, redacted and guarded one by one, joined; checked joined first (most hold nothing to change). */
function redactRun(texts: string[], redaction: ReturnType<typeof batchRedaction>): string {
  const joined = texts.join('');
  if (redaction.untouched(joined)) return mayGuard(joined) ? texts.map(guardOutput).join('') : joined;
  const each = texts.map((t) => guardOutput(redaction.each(t)));
  return each.length === 1 ? each[0]! : redaction.values(each.join(''));
}

/**
 * Texts ready to write, held in order while a write is under way on their stream, or on the other
 * stream when both go to one pipe (`2>&1`, a terminal): a pipe whose reader lags takes a write
 * later (Node finishes it asynchronously), and nothing written after may overtake it. So each
 * stream has at most one write under way (`underWay`), and what its pipe has not taken yet is
 * known at exit.
 */
const held: { stream: Stream; text: string }[] = [];
const underWay: Record<Stream, Buffer | undefined> = { stdout: undefined, stderr: undefined };

function send(stream: Stream, text: string): void {
  if (!text || dead[stream]) return;
  held.push({ stream, text });
  pump();
}

function pump(): void {
  while (held.length > 0) {
    const { stream, text } = held[0]!;
    const other = stream === 'stdout' ? 'stderr' : 'stdout';
    // Resumed from the callback of the write under way.
    if (busy(stream) || (busy(other) && sameDestination())) return;
    held.shift();
    if (dead[stream]) continue;
    write(stream, Buffer.from(text));
  }
}

/** Writes through the stream (a pipe that is full takes the rest later), kept as the write under way until done. */
function write(stream: Stream, data: Buffer): void {
  underWay[stream] = data;
  process[stream].write(data, () => {
    if (underWay[stream] === data) underWay[stream] = undefined;
    if (held.length > 0) pump();
  });
}

const busy = (stream: Stream) => !dead[stream] && process[stream].writableLength > 0;

let shared: boolean | undefined;
/** Whether stdout and stderr are one file, pipe or terminal (fstat once). */
function sameDestination(): boolean {
  if (shared === undefined) {
    try {
      const [a, b] = [fstatSync(1), fstatSync(2)];
      shared = a.dev === b.dev && a.ino === b.ino;
    } catch {
      shared = false;
    }
  }
  return shared;
}

/**
 * At exit (process.exit after an interrupt or a second Ctrl-C, an uncaught error before its
 * trace, the end of the work), everything written is written, in order: the rest of a write
 * under way (the bytes its pipe has not taken: Node would drop them), then what waits. A full
 * pipe is waited for EXIT_PATIENCE_MS at most (its reader may have stopped).
 */
function flushAtExit(): void {
  flushOutput();
  const deadline = Date.now() + EXIT_PATIENCE_MS;
  let whole = true;
  for (const stream of ['stdout', 'stderr'] as const) {
    const data = underWay[stream];
    const left = handle(stream)?.writeQueueSize ?? 0;
    if (data && busy(stream) && left > 0 && left <= data.length)
      whole = writeNow(stream, data.subarray(data.length - left), deadline) && whole;
  }
  for (const { stream, text } of held.splice(0)) whole = writeNow(stream, Buffer.from(text), deadline) && whole;
  // Node prints an uncaught error's trace after 'exit', with one plain write: to a non-blocking pipe
  // its reader has not emptied yet, that write fails (EAGAIN) and the trace is lost. A reader that
  // took everything above is reading: the pipes block from here, as Node itself resets them a moment
  // later. One that stopped (deadline passed) is not waited for again.
  if (whole) for (const stream of ['stdout', 'stderr'] as const) if (!dead[stream]) handle(stream)?.setBlocking?.(true);
}

/** The libuv handle under a standard stream: a pipe's has setBlocking and the bytes it has not written yet. */
const handle = (stream: Stream) =>
  (process[stream] as { _handle?: { writeQueueSize?: number; setBlocking?: (on: boolean) => number } })._handle;

const EXIT_PATIENCE_MS = 5000;
const pause = new Int32Array(new SharedArrayBuffer(4));

/**
 * Writes `data` whole, synchronously: a full non-blocking pipe is retried every few ms until the
 * deadline. False when it gave up on a pipe still full at the deadline.
 */
function writeNow(stream: Stream, data: Buffer, deadline: number): boolean {
  const fd = (process[stream] as { fd?: unknown }).fd;
  if (dead[stream] || typeof fd !== 'number') return true;
  for (let at = 0; at < data.length; ) {
    try {
      at += writeSync(fd, data, at);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== 'EAGAIN') return true;
      if (Date.now() > deadline) return false;
      Atomics.wait(pause, 0, 0, 5);
    }
  }
  return true;
}

// Registered first (the CLI loads this module before anything else hooks 'exit'), so before the
// profile is recorded (cli/profile.ts).
process.on('exit', flushAtExit);

export const out = (text: string) => enqueue('stdout', text);
export const err = (text: string) => enqueue('stderr', text);

/**
 * A run's closing lines (its summary): to stdout, or to stderr once stdout's reader is gone, so
 * that `kms-sync apply | tee apply.log` interrupted by Ctrl-C (which ends tee too) still shows
 * what was done. A stream write learns of a dead pipe only after the fact (its 'error' event), so
 * the first of these lines is written synchronously to find out before the summary is lost.
 */
export function outLast(text: string): void {
  flushOutput();
  if (dead.stdout) {
    err(text);
    return;
  }
  const fd = (process.stdout as { fd?: unknown }).fd;
  // Written synchronously only when nothing is under way or held: it would overtake it.
  const waits = held.length > 0 || busy('stdout') || (busy('stderr') && sameDestination());
  if (typeof fd !== 'number' || waits) {
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
    if (code === 'EAGAIN') return void write('stdout', data.subarray(at));
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
  enqueue('stderr', `::${command}${props ? ` ${props}` : ''}::${data(redactCredentials(message))}\n`, true);
}

/**
 * Text that must reach the terminal as it is (`::add-mask::` with the value it masks, a secret
 * revealed on request): after what waits in the queue, in order. Never for anything else.
 */
export function writeUnredacted(stream: Stream, text: string): void {
  flushOutput();
  send(stream, text);
}
