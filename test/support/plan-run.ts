// A CLI run against a test's emulator, as the engine's comparisons make it (test/engine/plan-threads,
// test/api/wire-thread): its output, the saved plan (--out), the requests it sent and its profile's phases.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type { RunningEmulator } from '../../src/emulator/index.js';
import { runCli } from './cli.js';

/** A text with the plan's time blanked (two runs differ only there: JSON fields, Markdown's footer). */
export const timeless = (text: string) =>
  text
    .replace(/"(?:generatedAt|generated_at)":\s*"[^"]+"/g, '"generated_at": "…"')
    .replace(/(<sub>kms-sync \w+ · )[^<]+/g, '$1…');

/** What two runs of one plan compare on: exit code, output and saved plan, the plan's time blanked. */
export const comparable = (r: { code: number; stdout: string; stderr: string }, saved = '') => ({
  code: r.code,
  stdout: timeless(r.stdout),
  stderr: r.stderr,
  saved: timeless(saved),
});

/** Runs `args` in `dir` against `emu` (its requests counted from zero) with `env` added; `tag` names its profile file. */
export async function planRun(
  emu: RunningEmulator,
  apiKey: string,
  dir: string,
  args: string[],
  tag: string,
  env: NodeJS.ProcessEnv,
) {
  const profile = path.join(dir, `profile-${tag}.json`);
  emu.resetCounts();
  const r = await runCli(args, {
    cwd: dir,
    env: { KMS_API_URL: emu.url, KMS_API_KEY: apiKey, KMS_SYNC_PROFILE: profile, ...env },
  });
  const requests = Object.values(emu.counts()).reduce((a, b) => a + b, 0);
  const saved = args.includes('--out') && r.code !== 1 ? readFileSync(path.join(dir, 'plan.json'), 'utf8') : '';
  const phases = JSON.parse(readFileSync(profile, 'utf8')).phases as Record<string, number>;
  return { r, saved, requests, phases };
}
