// Running a CDKTF app the way `cdktf synth` does, without the CLI: the `app` command of cdktf.json,
// in its folder, with CDKTF_OUTDIR pointing at a temporary folder; then manifest.json and every
// stacks/<name>/cdk.tf.json. No terraform, no network: the app is the user's own program.
import { spawn } from 'node:child_process';
import { mkdtemp, readFile, realpath, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { SynthesizedStack } from './stack-reader.js';
import { REDACTED, holdsCredential, leadsToCredential } from '../model/redact.js';

/** A CDKTF project or synth output that cannot be read at all (not a problem inside a stack). */
export class CdktfError extends Error {
  override name = 'CdktfError';
}

export interface CdktfProject {
  /** Folder of cdktf.json. */
  dir: string;
  app: string;
  context: Record<string, unknown>;
}

export async function readCdktfJson(dir: string): Promise<CdktfProject> {
  const file = path.join(dir, 'cdktf.json');
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch {
    throw new CdktfError(
      `no cdktf.json in ${dir}: pass the folder of a CDKTF project to --cdktf, or a synth output to --cdktf-out`,
    );
  }
  let json: { app?: unknown; context?: unknown };
  try {
    json = JSON.parse(text) as typeof json;
  } catch (e) {
    throw new CdktfError(`${file}: not valid JSON (${(e as Error).message})`);
  }
  if (typeof json.app !== 'string' || json.app.trim() === '')
    throw new CdktfError(`${file}: "app" must be the command that synthesizes the stacks, e.g. "node main.ts"`);
  const context =
    json.context && typeof json.context === 'object' && !Array.isArray(json.context)
      ? (json.context as Record<string, unknown>)
      : {};
  return { dir, app: json.app, context };
}

/**
 * The app's environment: `env` without what is or leads to a credential (model/redact.ts's one
 * predicate: by name, by the parts of a name, by value). The app is code from the configuration's
 * repository (a pull request's included; issue 26) and needs none of them to synthesize. This is
 * scrubbing, not isolation: the app runs as the same user (docs/security.md).
 */
export function appEnvironment(env: NodeJS.ProcessEnv): { env: NodeJS.ProcessEnv; removed: Map<string, string> } {
  const kept: NodeJS.ProcessEnv = {};
  const removed = new Map<string, string>();
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) continue;
    if (leadsToCredential(k) || holdsCredential(v, env)) removed.set(k, v);
    else kept[k] = v;
  }
  return { env: kept, removed };
}

/** `text` with every value in `values` (4+ characters) and anything shaped like a key replaced. */
function redactValues(text: string, values: Map<string, string>): string {
  let out = text;
  for (const [k, v] of [...values].sort((a, b) => b[1].length - a[1].length))
    if (v.length >= 4) out = out.split(v).join(`[REDACTED ${k}]`);
  return out
    .replace(/\b(sk_(live|test)_)[A-Za-z0-9._-]{4,}/g, `$1${REDACTED}`)
    .replace(/kmsc_[A-Za-z0-9_-]{8,}/g, `kmsc_${REDACTED}`);
}

/** The app's standard error, at most this many characters (the end is kept). */
const STDERR_MAX = 8000;

/**
 * Runs the app with CDKTF_OUTDIR=outDir (and the project's context, as the CLI passes it), without
 * kms-sync's credentials. Returns what the app wrote to stderr (its warnings, e.g. a deprecation
 * or a validation note), redacted like a failure's output, for the caller to show.
 */
export async function runApp(
  project: CdktfProject,
  outDir: string,
  env: NodeJS.ProcessEnv,
): Promise<{ stderr: string }> {
  const app = appEnvironment(env);
  const child = spawn(project.app, {
    cwd: project.dir,
    shell: true,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: {
      ...app.env,
      CDKTF_OUTDIR: outDir,
      CDKTF_CONTEXT_JSON: JSON.stringify(project.context),
      CHECKPOINT_DISABLE: '1',
    },
  });
  let output = '';
  let stderr = '';
  const keep = (b: Buffer) => {
    output = (output + b.toString('utf8')).slice(-8000);
  };
  child.stdout.on('data', keep);
  child.stderr.on('data', (b: Buffer) => {
    keep(b);
    stderr = (stderr + b.toString('utf8')).slice(-STDERR_MAX);
  });
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', (c) => resolve(c));
  });
  if (code !== 0) {
    throw new CdktfError(
      `the app of ${path.join(project.dir, 'cdktf.json')} (${project.app}) failed with exit code ${code}:\n${redactValues(output, app.removed).trimEnd()}`,
    );
  }
  return { stderr: redactValues(stderr, app.removed) };
}

interface Manifest {
  stacks?: Record<string, { name?: string; synthesizedStackPath?: string }>;
}

/**
 * Reads manifest.json and the selected stacks (all when `names` is empty). `persistent` output
 * keeps its file names and text for line:column in problems.
 */
export async function readSynthOutput(
  outDir: string,
  o: { names?: readonly string[]; persistent: boolean; cwd: string; maxBytes?: number },
): Promise<SynthesizedStack[]> {
  const manifestFile = path.join(outDir, 'manifest.json');
  // A synth output handed on from another job (--cdktf-out) is data written by the app: its files
  // are read only inside the output folder, within a size, and a parse error quotes none of them.
  const realOut = await realpath(outDir).catch(() => path.resolve(outDir));
  const budget = { left: o.maxBytes ?? SYNTH_MAX_BYTES };
  let manifest: Manifest;
  try {
    manifest = JSON.parse(await readInside(manifestFile, manifestFile, realOut, budget)) as Manifest;
  } catch (e) {
    if (e instanceof CdktfError) throw e;
    const why =
      (e as NodeJS.ErrnoException).code === 'ENOENT'
        ? 'missing'
        : e instanceof SyntaxError
          ? 'not valid JSON'
          : (e as Error).message;
    throw new CdktfError(
      `${manifestFile}: ${why} (is ${outDir} the output of cdktf synth, and did the app call app.synth()?)`,
    );
  }
  const all = Object.entries(manifest.stacks ?? {});
  const names = o.names ?? [];
  const unknown = names.filter((n) => !all.some(([k]) => k === n));
  if (unknown.length) {
    throw new CdktfError(
      `--stack ${unknown.join(', ')}: no such stack (the app has: ${all.map(([k]) => k).join(', ') || 'none'})`,
    );
  }
  const stacks: SynthesizedStack[] = [];
  for (const [name, s] of all) {
    if (names.length && !names.includes(name)) continue;
    const file = path.join(outDir, s.synthesizedStackPath ?? path.join('stacks', name, 'cdk.tf.json'));
    const shown = o.persistent ? path.relative(o.cwd, file) || file : `stack "${name}"`;
    let text: string;
    try {
      text = await readInside(file, shown, realOut, budget);
    } catch (e) {
      if (e instanceof CdktfError) throw e;
      throw new CdktfError(`${shown}: cannot read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`);
    }
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (e) {
      // Only where: Node's message quotes the text around the error.
      const at = /position (\d+)/.exec((e as Error).message)?.[1];
      throw new CdktfError(`${shown}: not valid JSON${at ? ` (at character ${at})` : ''}`);
    }
    if (!json || typeof json !== 'object' || Array.isArray(json))
      throw new CdktfError(`${shown}: not a Terraform JSON configuration`);
    stacks.push({ name, file: shown, json: json as Record<string, unknown>, ...(o.persistent ? { text } : {}) });
  }
  return stacks;
}

/** The most a synth output's files may hold together, by default (a stack of 10,000 clients is a few MB). */
const SYNTH_MAX_BYTES = 50 * 1024 * 1024;

/** A file of the synth output, if it resolves inside it and fits what is left of the budget. */
async function readInside(file: string, shown: string, realOut: string, budget: { left: number }): Promise<string> {
  const real = await realpath(file);
  const rel = path.relative(realOut, real);
  if (rel.startsWith('..') || path.isAbsolute(rel))
    throw new CdktfError(
      `${shown}: resolves outside the synth output folder (a symbolic link, or a stack path with ..): it is not read`,
    );
  const size = (await stat(real)).size;
  if (size > budget.left)
    throw new CdktfError(
      `${shown}: the synth output is larger than ${Math.round((budget.left + 0) / 1024 / 1024)} MB left of its limit (--max-config-size or KMS_SYNC_MAX_CONFIG_SIZE): it is not read`,
    );
  budget.left -= size;
  return readFile(real, 'utf8');
}

/** Synthesizes the project into a temporary folder, reads it, removes the folder; the app's stderr with the stacks. */
export async function synthesize(
  project: CdktfProject,
  o: { names?: readonly string[]; env: NodeJS.ProcessEnv; cwd: string; maxBytes?: number },
): Promise<{ stacks: SynthesizedStack[]; stderr: string }> {
  const out = await mkdtemp(path.join(tmpdir(), 'kms-sync-cdktf-'));
  try {
    const { stderr } = await runApp(project, out, o.env);
    return {
      stacks: await readSynthOutput(out, {
        ...(o.names ? { names: o.names } : {}),
        persistent: false,
        cwd: o.cwd,
        ...(o.maxBytes ? { maxBytes: o.maxBytes } : {}),
      }),
      stderr,
    };
  } finally {
    await rm(out, { recursive: true, force: true });
  }
}
