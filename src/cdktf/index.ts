// The CDKTF front end: synthesized stacks → documents of the kms-sync/v1 format, which the
// configuration builder turns into the one desired-state model with the same checks as YAML.
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { stacksToDocuments, type Diagnostic, type ForeignDocument } from './documents.js';
import { readStack, type SynthesizedStack } from './stack-reader.js';
import { CdktfError, readCdktfJson, readSynthOutput, synthesize } from './synth.js';
import { readVariableValues } from './variables.js';

export { CdktfError } from './synth.js';
export type { Diagnostic, ForeignDocument, PathSegment } from './documents.js';
export { PROVIDER_SOURCE, RESOURCE_MAPPINGS, KMS_RESOURCE_TYPES } from './mapping.js';
export { desiredStateToCdktf, type CdktfExportOptions, type CdktfFlavour } from './export.js';

export interface CdktfOptions {
  /** Folder of cdktf.json: its app is run to synthesize (unless outDir is given). */
  dir?: string;
  /** An existing synth output (cdktf.out) to read instead of running the app. */
  outDir?: string;
  /** Largest synthesized file read (manifest.json, a stack's cdk.tf.json), and their sum (default 50 MB). */
  maxBytes?: number;
  /** Stack names to read (default: all). */
  stacks?: readonly string[];
  /** Environment of the app and source of TF_VAR_* (default: process.env). */
  env?: NodeJS.ProcessEnv;
  /** Base of relative paths and of file names in problems (default: process.cwd()). */
  cwd?: string;
}

export interface CdktfInput {
  documents: ForeignDocument[];
  /** Problems found in the stacks (unsupported expressions, unknown references, ...), all of them. */
  diagnostics: Diagnostic[];
  /** What was read, as shown: `stack "NAME"` or the cdk.tf.json paths. */
  files: string[];
  /** Where relative store URIs and the key journal resolve: the provider's base_dir, else the project folder. */
  baseDir: string;
  /** Milliseconds spent running the app (0 when reading an existing output). */
  synthMs: number;
  /** Milliseconds spent turning the synth output into documents. */
  readMs: number;
  /** What the app wrote to stderr while synthesizing (redacted, unescaped; '' when not run). */
  appStderr: string;
}

/** Synthesizes (or reads) a CDKTF project's stacks and turns their kms_* resources into documents. */
export async function loadCdktf(o: CdktfOptions): Promise<CdktfInput> {
  const cwd = path.resolve(o.cwd ?? process.cwd());
  const env = o.env ?? process.env;
  if (!o.dir && !o.outDir)
    throw new CdktfError('nothing to read: give the CDKTF project folder or a synth output folder');
  const projectDir = o.dir ? path.resolve(cwd, o.dir) : path.dirname(path.resolve(cwd, o.outDir!));
  const names = o.stacks?.length ? o.stacks : undefined;
  let stacks: SynthesizedStack[];
  let synthMs = 0;
  let appStderr = '';
  if (o.outDir) {
    stacks = await readSynthOutput(path.resolve(cwd, o.outDir), {
      ...(names ? { names } : {}),
      persistent: true,
      cwd,
      ...(o.maxBytes ? { maxBytes: o.maxBytes } : {}),
    });
  } else {
    const project = await readCdktfJson(projectDir);
    const t0 = performance.now();
    ({ stacks, stderr: appStderr } = await synthesize(project, {
      ...(names ? { names } : {}),
      env,
      cwd,
      ...(o.maxBytes ? { maxBytes: o.maxBytes } : {}),
    }));
    synthMs = performance.now() - t0;
  }
  const t1 = performance.now();
  const vars = await readVariableValues(projectDir, env);
  const diagnostics: Diagnostic[] = vars.problems.map((message) => ({
    file: path.relative(cwd, projectDir) || '.',
    line: 0,
    column: 0,
    path: '',
    message,
  }));
  const read = stacks.map((stack) => ({ stack, read: readStack(stack, vars) }));
  const docs = stacksToDocuments(read);
  diagnostics.push(...docs.diagnostics);
  const baseDir = docs.baseDirs[0] !== undefined ? path.resolve(projectDir, docs.baseDirs[0]) : projectDir;
  return {
    documents: docs.documents,
    diagnostics,
    files: stacks.map((s) => s.file),
    baseDir,
    synthMs,
    readMs: performance.now() - t1,
    appStderr,
  };
}
