// Refreshes SLOW_FIRST in test/support/sequencer.ts (the test files that start first, slowest
// first) from the per-file durations of a real run, so that the list follows the suite as it grows:
//   node scripts/slow-first.ts <file>            rewrite the list (files that took 8 s or more)
//   node scripts/slow-first.ts <file> --min 10   another threshold, in seconds
//   node scripts/slow-first.ts <file> --check    exit 1 when the committed list differs
// <file> is either vitest's JSON report (`npx vitest run --reporter=default --reporter=json
// --outputFile.json=report.json`) or the output of a run with the default reporter, as CI's log
// keeps it (ANSI colours and all: `✓ test/x.test.ts (3 tests) 1234ms`). Take it from the clean-clone
// CI run: a developer's machine differs in load, and a file skipped there (quick start) would drop
// out of the list.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const SEQUENCER_FILE = path.join(root, 'test', 'support', 'sequencer.ts');
const BEGIN = 'export const SLOW_FIRST: Record<string, number> = {';
const END = '};';

/** Per-file durations in seconds (file relative to the repository, forward slashes) from a report or a log. */
export function fileSeconds(text: string, repoRoot = root): Map<string, number> {
  const out = new Map<string, number>();
  const trimmed = text.trimStart();
  if (trimmed.startsWith('{')) {
    const report = JSON.parse(trimmed) as { testResults?: { name: string; startTime: number; endTime: number }[] };
    for (const r of report.testResults ?? []) {
      const file = path.relative(repoRoot, r.name).split(path.sep).join('/');
      out.set(file, (r.endTime - r.startTime) / 1000);
    }
    return out;
  }
  const plain = text.replace(/\x1b\[[0-9;]*m/g, '');
  for (const line of plain.split('\n')) {
    // A file's summary line, after its vitest project's name (` ✓  shared  test/x.test.ts …`); a
    // test's line is indented further and names no .test.ts file first.
    const m = /^ {1,2}[✓×❯↓] (?: *\w+ +)?(test\/\S+\.test\.ts) .*?(\d+)ms\s*$/.exec(line);
    if (m) out.set(m[1]!, Number(m[2]) / 1000);
  }
  return out;
}

/** The SLOW_FIRST object's body: files at `min` seconds or more, slowest first, whole seconds. */
export function slowFirstBody(seconds: Map<string, number>, min: number): string {
  return [...seconds]
    .filter(([, s]) => s >= min)
    .sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))
    .map(([file, s]) => `  '${file}': ${Math.round(s)},\n`)
    .join('');
}

/** `source` (sequencer.ts) with its SLOW_FIRST body replaced. */
export function withSlowFirst(source: string, body: string): string {
  const start = source.indexOf(BEGIN);
  const end = start < 0 ? -1 : source.indexOf(`\n${END}`, start);
  if (start < 0 || end < 0) throw new Error(`${SEQUENCER_FILE}: no "${BEGIN}" … "${END}" block`);
  return `${source.slice(0, start + BEGIN.length)}\n${body}${source.slice(end + 1)}`;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const minAt = args.indexOf('--min');
  const min = minAt >= 0 ? Number(args[minAt + 1]) : 8;
  const input = args.find((a, i) => !a.startsWith('--') && (minAt < 0 || i !== minAt + 1));
  if (!input || !Number.isFinite(min)) {
    process.stderr.write(
      'usage: node scripts/slow-first.ts <vitest JSON report | run log> [--min seconds] [--check]\n',
    );
    process.exit(2);
  }
  const seconds = fileSeconds(readFileSync(input, 'utf8'));
  if (seconds.size === 0) {
    process.stderr.write(`${input}: no per-file durations found (a vitest JSON report or a default-reporter log)\n`);
    process.exit(1);
  }
  const before = readFileSync(SEQUENCER_FILE, 'utf8');
  const after = withSlowFirst(before, slowFirstBody(seconds, min));
  if (args.includes('--check')) {
    if (after !== before) {
      process.stderr.write(
        `${SEQUENCER_FILE}: SLOW_FIRST differs from ${input}; run node scripts/slow-first.ts ${input}\n`,
      );
      process.exit(1);
    }
  } else {
    writeFileSync(SEQUENCER_FILE, after);
    const listed = [...seconds.values()].filter((s) => s >= min).length;
    process.stdout.write(
      `${path.relative(root, SEQUENCER_FILE)}: ${listed} files of ${seconds.size} at ${min} s or more\n`,
    );
  }
}
