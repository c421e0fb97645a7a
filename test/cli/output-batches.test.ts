// The CLI's output queue (cli/output.ts), in real processes (test/cli/fixtures/output-writer.mjs
// writes through the built module): lines leave in batches, redacted with one read of the
// environment per batch. What it must keep: a credential in the environment when a line is
// written is never printed, in any spelling, also when its variable changes or goes before the
// batch leaves, or when the line came in two writes; and nothing written is lost or reordered,
// whichever way the process ends (its end, process.exit, an uncaught error, an unhandled
// rejection, SIGTERM, the closing lines written synchronously).
import { execFile } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/cli.js';

const fixture = path.join(repoRoot, 'test', 'cli', 'fixtures', 'output-writer.mjs');
const secret = (n: number) => `t0k3n-${n}-Qz7vR2mW9xK4pL1nZt5bN8cV`;

interface Run {
  code: number | null;
  signal: string | null;
  stdout: string;
  stderr: string;
}

/**
 * The fixture in its own process; `merged`: stderr on stdout's pipe (`2>&1`), as a terminal or a
 * CI log shows them; `lagAfter`: the reader stops reading for a while once that text arrived, as a
 * busy CI runner does.
 */
function write(scenario: string, merged = false, lagAfter?: string): Promise<Run> {
  const command = merged
    ? ['sh', ['-c', `exec "$0" "$1" "$2" 2>&1`, process.execPath, fixture, scenario]]
    : [process.execPath, [fixture, scenario]];
  return new Promise((resolve) => {
    const child = execFile(
      command[0] as string,
      command[1] as string[],
      { env: { PATH: process.env.PATH, HOME: process.env.HOME, NO_COLOR: '1' }, maxBuffer: 64 * 1024 * 1024 },
      (_error, stdout, stderr) => resolve({ code: child.exitCode, signal: child.signalCode, stdout, stderr }),
    );
    if (!lagAfter) return;
    let tail = '';
    const watch = (chunk: Buffer) => {
      tail = (tail + chunk.toString('latin1')).slice(-2 * lagAfter.length);
      if (!tail.includes(lagAfter)) return;
      child.stdout?.off('data', watch);
      child.stdout?.pause();
      setTimeout(() => child.stdout?.resume(), 300);
    };
    child.stdout?.on('data', watch);
  });
}

describe('a credential in the environment when a line is written is never printed', () => {
  it('set mid-run, in every spelling, on both streams, split over two writes, changed or unset before the line leaves', async () => {
    const r = await write('secrets');
    expect(r.code, r.stderr).toBe(0);
    // `::add-mask::` hands the runner a value to hide (secret 7, no credential here): never shown.
    const all = (r.stdout + r.stderr)
      .split('\n')
      .filter((l) => !l.startsWith('::add-mask::'))
      .join('\n');
    for (const n of [1, 2, 3, 4, 5]) {
      const b = Buffer.from(secret(n));
      for (const spelling of [
        secret(n),
        secret(n).toUpperCase(),
        b.toString('base64'),
        b.toString('hex'),
        b.toString('hex').toUpperCase(),
        // Any 12 characters in a row of the value: no piece of it is left either.
        secret(n).slice(5, 17),
        secret(n).slice(14, 26),
      ])
        expect(all, `secret ${n} as ${spelling}`).not.toContain(spelling);
    }
    expect(r.stdout).toContain('set then written: [REDACTED DEPLOY_TOKEN]\n');
    expect(r.stderr).toContain('on stderr: [REDACTED DEPLOY_TOKEN]\n');
    expect(r.stdout).toMatch(/^base64 \[REDACTED DEPLOY_TOKEN\] hex \[REDACTED DEPLOY_TOKEN\]$/m);
    expect(r.stdout).toContain('markdown | `[REDACTED DEPLOY_TOKEN]` |\n');
    expect(r.stdout).toContain('split [REDACTED DEPLOY_TOKEN] across two writes\n');
    expect(r.stdout).toContain('written before its variable changed: [REDACTED ROTATED_SECRET]\n');
    expect(r.stdout).toContain('written after: [REDACTED ROTATED_SECRET]\n');
    expect(r.stdout).toContain('written before its variable went: [REDACTED GONE_PASSWORD]\n');
    expect(r.stderr).toContain('registered: [REDACTED raw key]\n');
    // Hostile text cannot start a workflow command; the ones kms-sync gives can, in their order.
    const stderr = r.stderr.split('\n');
    expect(stderr).toContain('\\::error::from a name');
    const warning = stderr.indexOf('::warning::given on purpose [REDACTED DEPLOY_TOKEN]');
    expect(warning, r.stderr).toBeGreaterThan(stderr.indexOf('\\::error::from a name'));
    expect(stderr.indexOf(`::add-mask::${secret(7)}`)).toBe(warning + 1);
    expect(r.stdout.split('\n')).toEqual([
      'start',
      'set then written: [REDACTED DEPLOY_TOKEN]',
      expect.stringMatching(/^base64 /),
      expect.stringMatching(/^json /),
      expect.stringMatching(/^markdown /),
      'split [REDACTED DEPLOY_TOKEN] across two writes',
      'read by a flush',
      'written before its variable changed: [REDACTED ROTATED_SECRET]',
      'written after: [REDACTED ROTATED_SECRET]',
      'written before its variable went: [REDACTED GONE_PASSWORD]',
      'end',
      '',
    ]);
  });
});

describe('nothing written is lost or reordered, however the process ends', () => {
  /** The 3,000 numbered lines, complete and in the order written, stdout and stderr interleaved as written. */
  function linesInOrder(text: string): number {
    const lines = [...text.matchAll(/^line (\d+) (out|err) x{40}$/gm)];
    lines.forEach((m, i) => {
      expect(Number(m[1]), `line ${i}`).toBe(i);
      expect(m[2], `line ${i}`).toBe(i % 3 === 2 ? 'err' : 'out');
    });
    return lines.length;
  }

  // An uncaught error's trace (Node prints it after 'exit', in one write) is longer than a pipe
  // holds, and the reader lags once the last line arrived: the trace arrives whole only if the
  // pipe blocks once the lines are out.
  const trace = (message: string) => `Error: ${message} <300000 y> end of the message\n`;
  it.each([
    ['end', 0, undefined],
    ['exit', 3, undefined],
    ['throw', 1, trace('crash after writing')],
    ['reject', 1, trace('rejected after writing')],
    ['sigterm', 143, undefined],
  ])('its end by %s: exit %d, every line before anything said after', async (end, code, after) => {
    const r = await write(`lines-${end}`, true, 'line 2999 err');
    expect(r.code, r.stdout.slice(-500)).toBe(code);
    expect(linesInOrder(r.stdout)).toBe(3000);
    const rest = r.stdout
      .slice(r.stdout.indexOf('line 2999 err'))
      .split('\n')
      .slice(1)
      .join('\n')
      .replace(/y{20,}/g, (ys) => `<${ys.length} y>`);
    if (after) {
      expect(rest).toContain(after);
      expect(rest).toMatch(/\n\nNode\.js v[\d.]+\n$/);
    } else expect(rest).toBe('');
    expect(r.stdout.startsWith('line 0 out')).toBe(true);
  });

  it('the closing lines, written synchronously (outLast), come after every line written before them', async () => {
    const r = await write('lines-outlast', true);
    expect(r.code, r.stdout.slice(-500)).toBe(0);
    expect(linesInOrder(r.stdout)).toBe(3000);
    expect(r.stdout.endsWith('line 2999 err ' + 'x'.repeat(40) + '\nsummary: the last line\n')).toBe(true);
  });
});
