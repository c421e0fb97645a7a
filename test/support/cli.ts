// Runs the built CLI as a real process, the way users and CI do.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { scratchDir } from './scratch.js';

export const repoRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
export const cliPath = path.join(repoRoot, 'dist', 'bin', 'kms-sync.js');

export interface CliResult {
  code: number;
  stdout: string;
  stderr: string;
}

/** Every output of every CLI run in a test file, to assert that no raw key ever appears. */
export const allOutput: string[] = [];

export function runCli(
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; cwd?: string; input?: string } = {},
): Promise<CliResult> {
  return new Promise((resolve) => {
    const child = execFile(
      process.execPath,
      [cliPath, ...args],
      {
        cwd: opts.cwd ?? repoRoot,
        // TMPDIR: the run's temporary folder, as a user's environment would have it.
        env: { PATH: process.env.PATH, HOME: process.env.HOME, TMPDIR: process.env.TMPDIR, NO_COLOR: '1', ...opts.env },
        maxBuffer: 64 * 1024 * 1024,
      },
      (error, stdout, stderr) => {
        allOutput.push(stdout, stderr);
        const code = error
          ? typeof (error as { code?: unknown }).code === 'number'
            ? (error as { code: number }).code
            : 1
          : 0;
        resolve({ code, stdout, stderr });
      },
    );
    if (opts.input !== undefined) child.stdin?.end(opts.input);
  });
}

/** A process started with its stdout and stderr kept together, in the order they arrive. */
export interface RunningProcess {
  child: ChildProcess;
  /** Its exit code (null when a signal ended it), once its output is closed and kept in `sink`. */
  exit: Promise<number | null>;
  output: () => string;
}

/** Starts a process whose stdout and stderr are kept together; they go into `sink` once it exits. */
export function startProcess(
  cmd: string,
  args: string[],
  o: { cwd: string; env: NodeJS.ProcessEnv; sink: string[] },
): RunningProcess {
  const child = spawn(cmd, args, { cwd: o.cwd, env: o.env, stdio: ['ignore', 'pipe', 'pipe'] });
  let text = '';
  const keep = (d: Buffer) => {
    text += d.toString();
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const exit = new Promise<number | null>((resolve) =>
    child.on('close', (code) => {
      o.sink.push(text);
      resolve(code);
    }),
  );
  return { child, exit, output: () => text };
}

/** The built CLI started as a real process (see `startProcess`); its output goes into `allOutput` unless `sink` says where. */
export const startCli = (args: string[], o: { cwd: string; env: NodeJS.ProcessEnv; sink?: string[] }) =>
  startProcess(process.execPath, [cliPath, ...args], { sink: allOutput, ...o });

/** Writes files from a map of relative path → content under `dir`. */
export function writeFiles(dir: string, files: Record<string, string>): void {
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    writeFileSync(path.join(dir, rel), text);
  }
}

/** A scratch folder with files written from a map of relative path → content, removed after the test file. */
export function workspace(files: Record<string, string> = {}): string {
  const dir = scratchDir('kms-sync-test-');
  writeFiles(dir, files);
  return dir;
}

/** Raw customer keys look like kmsc_ + 43 base64url characters. */
export const RAW_KEY_PATTERN = /kmsc_[A-Za-z0-9_-]{20,}/;
