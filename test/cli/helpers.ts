// Shared by the CLI tests: the emulator, a workspace with a small configuration, and a real
// pseudo-terminal (util-linux `script`) for what depends on a TTY.
import { execFile } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startEmulator, type RunningEmulator } from '../../src/emulator/index.js';
import { allOutput, cliPath, runCli, workspace } from '../support/cli.js';

export const TEST_KEY = 'sk_test_clitests0123456';

export const smallConfig = `apiVersion: kms-sync/v1
projects:
  - slug: shop
    name: Shop
    environments:
      - type: staging
        url: https://s.example
        templates: [{ name: std, rateLimitDay: 10 }]
        clients: [{ name: web, template: std, keys: [{ name: main }] }, { name: app, template: std, keys: [{ name: main }] }]
`;

export interface Setup {
  emu: RunningEmulator;
  dir: string;
  env: NodeJS.ProcessEnv;
}

export async function setup(
  files: Record<string, string> = { 'kms-sync.yaml': smallConfig },
  emulator: { latencyMs?: number } = {},
): Promise<Setup> {
  const emu = await startEmulator({ port: 0, apiKeys: [TEST_KEY], ...emulator });
  const dir = workspace(files);
  return {
    emu,
    dir,
    env: { KMS_API_URL: emu.url, KMS_API_KEY: TEST_KEY, SOPS_AGE_KEY_FILE: path.join(dir, 'age.txt') },
  };
}

/**
 * The small configuration in a folder of its own, with an emulator: `cli` runs the built CLI there
 * (extra variables on top of the workspace's), `write` replaces kms-sync.yaml. What to close and
 * remove goes into `cleanup`, which the test file empties after each test.
 */
export async function configWorkspace(cleanup: (() => unknown)[]) {
  const s = await setup();
  cleanup.push(
    () => s.emu.close(),
    () => rmSync(s.dir, { recursive: true, force: true }),
  );
  const cli = (args: string[], env: NodeJS.ProcessEnv = {}) => runCli(args, { env: { ...s.env, ...env }, cwd: s.dir });
  const write = (config: string) => writeFileSync(path.join(s.dir, 'kms-sync.yaml'), config);
  return { ...s, cli, write };
}

const quote = (a: string) => `'${a.replace(/'/g, `'\\''`)}'`;
export const cliCommand = (args: string[]) => [process.execPath, cliPath, ...args].map(quote).join(' ');

/**
 * Runs a shell command line inside a pseudo-terminal (stdin, and stdout unless the line pipes it,
 * are the terminal), typing `answer` once `prompt` appears in the output.
 */
export function runInTty(
  commandLine: string,
  opts: {
    cwd: string;
    env: NodeJS.ProcessEnv;
    answer?: string;
    prompt?: RegExp;
    /** Done once the prompt appears, before the answer is typed (a change made while the run waits). */
    beforeAnswer?: () => Promise<void>;
  },
): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    let output = '';
    let answered = false;
    // bash with pipefail: a pipeline's exit code is the CLI's, not that of `tee` or `cat`.
    const child = execFile(
      'script',
      ['-qefc', `set -o pipefail; ${commandLine}`, '/dev/null'],
      {
        cwd: opts.cwd,
        env: {
          PATH: process.env.PATH,
          HOME: process.env.HOME,
          TERM: 'dumb',
          NO_COLOR: '1',
          SHELL: '/bin/bash',
          ...opts.env,
        },
      },
      (error) => {
        allOutput.push(output);
        resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, output });
      },
    );
    child.stdout!.on('data', (d: Buffer) => {
      output += d.toString();
      if (!answered && opts.answer !== undefined && (opts.prompt ?? /accepted: |to confirm/).test(output)) {
        answered = true;
        const answer = opts.answer;
        void (opts.beforeAnswer?.() ?? Promise.resolve()).then(() => {
          child.stdin!.write(`${answer}\n`);
          setTimeout(() => child.stdin!.end(), 500);
        });
      }
    });
    if (opts.answer === undefined) child.stdin!.end();
  });
}
