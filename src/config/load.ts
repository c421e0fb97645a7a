// Loading, validating and merging YAML and JSON files into the one desired-state model.
import { isAscii } from 'node:buffer';
import path from 'node:path';
import {
  NormalizeError,
  canonicalCidr,
  canonicalTimestamp,
  methodPath,
  type ConfigSettings,
  parseTtl,
  projectEnvOf,
  type DesiredClient,
  type DesiredEndpoint,
  type DesiredEnv,
  type DesiredKey,
  type DesiredProject,
  type DesiredState,
  type DesiredTemplate,
  type JsonObject,
  type SecretTarget,
  type SourceLocation,
  type StoreDeclaration,
  sortInPlace,
  DEFAULT_POLICY,
  envAllowed,
  type OperatorPolicy,
} from '../model/index.js';
import { decodeConfig } from './decode.js';
import {
  ConfigError,
  formatPath,
  formatPlace,
  NotStreamable,
  type Diagnostic,
  type PathSegment,
} from './diagnostics.js';
import { PolicedEnv, type EnvMap, type EnvSource } from './interpolate.js';
import { configLimits, type ConfigLimits } from './limits.js';
import { collectFiles, displayPath, letGo, readBounded, readPart, type FileAt, type FileRules } from './paths.js';
import { validateAgainstSchema } from './schema.js';
import { parseDeferredChunks, parseFile, parseFileSkeleton, unplaced, type SourceDocument } from './source.js';
import { type DeferredBlock, LineScanner, type LineTable, lineTable } from './fast-yaml.js';
import { closest } from './suggest.js';

export interface LoadOptions {
  /** Variables for `${env:NAME}` (default: process.env). */
  env?: Record<string, string | undefined>;
  /** Base of relative paths, and of the file names in sources and errors (default: process.cwd()). */
  cwd?: string;
  /** Documents of another front end (CDKTF), merged with the files under one set of rules. */
  documents?: ForeignDocument[];
  /** Problems that front end found already (reported with the others). */
  diagnostics?: Diagnostic[];
  /**
   * Called with every document's plain value once all are parsed, before they are checked: a
   * caller may start work that needs only the environments (a plan's live read), and loading then
   * pauses now and then so that work proceeds beside it.
   */
  onParsed?: (documents: unknown[], streamed?: { bytes: number }) => void;
  /** Sizes per file and in all (default: configLimits(), from KMS_SYNC_MAX_FILE_SIZE / KMS_SYNC_MAX_CONFIG_SIZE). */
  limits?: ConfigLimits;
  /** Where files may come from (default: each inside the folder named by -f; see FileRules). */
  files?: FileRules;
  /**
   * The operator's policy (model/policy.ts): which variables `${env:}` may read. Without `env`
   * and `policy`, the default policy (none) applies to process.env; an explicit `env` map without
   * a policy (tests, libraries) is read without an allowlist.
   */
  policy?: OperatorPolicy;
  /**
   * Whether a streamed load's clients and endpoints will be read on this thread, given the texts'
   * length (default: yes). When not (worker threads read them: engine/plan-threads.ts), the
   * skeleton read's line table is let go at once instead of copied out part by part.
   */
  bodiesHere?: (chars: number) => boolean;
}

/**
 * A document in this format produced by another front end (src/cdktf from synthesized stacks),
 * with its own places: it gets the same schema checks, normalisation, reference checks and
 * duplicate-identity rule as a YAML document, across both.
 */
export interface ForeignDocument {
  /** Shown as the file in diagnostics. */
  file: string;
  value: unknown;
  /** Place and shown path of a field path of `value`. */
  locate(segments: readonly PathSegment[], atKey: boolean): { line: number; column: number; path: string };
}

export interface LoadResult {
  state: DesiredState;
  /** The files read, in load order, relative to cwd. */
  files: string[];
  /** Problems that do not stop loading (an empty file). */
  warnings: Diagnostic[];
}

/** One YAML (or, for a `.json` name, JSON) text with the file name used in sources and diagnostics. */
export interface ConfigSource {
  file: string;
  text: string;
  /**
   * The file it was read from, when its text is its bytes (ASCII) and it did not change while it
   * was read: a streamed load on worker threads reads each environment's part of it again there,
   * by offset (readPart), and this thread lets go of the text once the skeleton is read.
   */
  at?: FileAt;
  /**
   * The text's line table, when the file's read (ReadScan) or the check of one environment
   * (bodyWordsAtMostOnce) built it: the skeleton read that follows takes it (takeLines) instead of
   * scanning the text again.
   */
  lines?: LineTable;
}

/**
 * What readSources works out of a large file's bytes while the rest is read (readBounded's
 * `onRead`): whether they are ASCII, and if so their line table (LineScanner), the one the
 * skeleton read takes (ConfigSource.lines) instead of scanning the text. Nothing for a file read
 * whole at once, or one that grew while read.
 */
class ReadScan {
  private ascii = true;
  private upTo = 0;
  private lines: LineScanner | undefined;

  readonly onRead = (bytes: Buffer, upTo: number): void => {
    if (!this.ascii) return;
    this.ascii = isAscii(bytes.subarray(this.upTo, upTo));
    if (!this.ascii) return;
    this.lines ??= new LineScanner(bytes.length);
    this.lines.scan(bytes, upTo);
    this.upTo = upTo;
  };

  /** The table of `bytes` (the file read), when all of them were scanned and are ASCII. */
  finish(bytes: Buffer): LineTable | undefined {
    if (!this.ascii || !this.lines || this.upTo !== bytes.length) return undefined;
    return this.lines.finish(bytes, this.upTo);
  }
}

/** A source's line table built already, once: the taker owns it (a streamed load lets it go). */
function takeLines(source: ConfigSource): LineTable | undefined {
  const lines = source.lines;
  source.lines = undefined;
  return lines;
}

/**
 * Loads files and folders (`-f` arguments) into a DesiredState. All problems of all files are
 * collected and thrown together as one ConfigError.
 */
export async function loadDesiredState(paths: string[], opts: LoadOptions = {}): Promise<LoadResult> {
  return loadWhole(await readSources(paths, opts), opts);
}

/** loadDesiredState of texts read already. */
async function loadWhole({ sources, pre }: SourcesRead, opts: LoadOptions): Promise<LoadResult> {
  const warnings: Diagnostic[] = [];
  pre.push(...(opts.diagnostics ?? []));
  const foreign = opts.documents ?? [];
  const env = envOf(opts);
  const state = opts.onParsed
    ? await buildDesiredStatePaced(sources, env, pre, foreign, warnings, opts.onParsed)
    : buildDesiredState(sources, env, pre, foreign, warnings);
  return { state, files: [...sources.map((s) => s.file), ...new Set(foreign.map((d) => d.file))], warnings };
}

/** The `${env:}` source of a load: the policy's allowlist over `env` (see LoadOptions.policy). */
function envOf(opts: LoadOptions): EnvSource {
  return opts.policy || !opts.env ? policedEnv(opts.env ?? process.env, opts.policy ?? DEFAULT_POLICY) : opts.env;
}

/** The texts of the files `paths` name, and the problems of those that cannot be read. */
interface SourcesRead {
  sources: ConfigSource[];
  pre: Diagnostic[];
}

async function readSources(paths: string[], opts: LoadOptions): Promise<SourcesRead> {
  const cwd = path.resolve(opts.cwd ?? process.cwd());
  const pre: Diagnostic[] = [];
  // A CDKTF-only run names no files.
  const rules = opts.files ?? {};
  const found = paths.length === 0 && opts.documents ? [] : await collectFiles(paths, cwd, pre, rules);
  const limits = opts.limits ?? configLimits();
  const budget = { left: limits.totalBytes };
  const sources: ConfigSource[] = [];
  for (const { path: f } of found) {
    const file = displayPath(f, cwd);
    let bytes: Buffer;
    let at: FileAt | undefined;
    const scan = /\.json$/i.test(f) ? undefined : new ReadScan();
    try {
      const read = await readBounded(f, limits, budget, rules.refuseLinks === true, scan?.onRead);
      if ('problem' in read) {
        pre.push({ file, line: 0, column: 0, path: '', message: read.problem });
        continue;
      }
      bytes = read.bytes;
      at = read.at;
    } catch (err) {
      pre.push({ file, line: 0, column: 0, path: '', message: `cannot read file: ${describeReadError(err)}` });
      continue;
    }
    const lines = scan?.finish(bytes);
    const decoded = decodeConfig(file, bytes, lines !== undefined);
    letGo(bytes);
    if ('diagnostic' in decoded) {
      if (lines) for (const column of [lines.starts, lines.ends, lines.indents]) letGo(column);
      pre.push(decoded.diagnostic);
      continue;
    }
    sources.push({ file, text: decoded.text, ...(decoded.ascii && at ? { at } : {}), ...(lines ? { lines } : {}) });
  }
  return { sources, pre };
}

/** A configuration loaded environment by environment: its skeleton, and each environment's clients and endpoints on demand. */
export interface StreamedLoad extends LoadResult {
  /** `state` holds no clients and no endpoints: they are read from here, one environment at a time. */
  bodies: StreamedBodies;
}

/**
 * Loads files and folders like loadDesiredState, but for a plan that goes environment by
 * environment (engine/run.ts planFor): the environments' clients and endpoints are left unread
 * (fast-yaml.ts DeferredBlock), and each is read, checked and built when its environment is
 * planned, then let go (StreamedBodies.take): the configuration's working set is then one
 * environment, its text aside. Undefined when only the whole load can do it (any file that is JSON
 * or outside the fast YAML subset, a problem or a warning anywhere in the skeleton, CDKTF
 * documents). A problem or warning found later, in an environment's clients or endpoints, throws
 * NotStreamable from StreamedBodies: the caller loads the whole then, which reports it as it does
 * today (nothing was written meanwhile; a plan only reads). `onParsed` is called only when the
 * skeleton loaded, with its documents.
 */
export async function loadDesiredStateStreamed(
  paths: string[],
  opts: LoadOptions = {},
): Promise<StreamedLoad | undefined> {
  if (opts.documents || opts.diagnostics?.length) return undefined;
  return loadStreamed(await readSources(paths, opts), opts);
}

/**
 * loadDesiredStateStreamed, or loadDesiredState when it declines, of the files read once (a
 * configuration of one environment, the usual one, is always loaded whole).
 */
export async function loadDesiredStateStreamedOrWhole(
  paths: string[],
  opts: LoadOptions = {},
): Promise<StreamedLoad | LoadResult> {
  if (opts.documents || opts.diagnostics?.length) return loadDesiredState(paths, opts);
  const read = await readSources(paths, opts);
  return (await loadStreamed(read, opts)) ?? loadWhole(read, opts);
}

/** loadDesiredStateStreamed of texts read already. */
async function loadStreamed({ sources, pre }: SourcesRead, opts: LoadOptions): Promise<StreamedLoad | undefined> {
  if (pre.length > 0) return undefined;
  // One environment is loaded whole (below): say so before the skeleton read (a fifth of a parse)
  // when the texts name `clients` and `endpoints` once at most. A key spelled with escapes only
  // sends a configuration to the whole load, whose output is the same.
  if (bodyWordsAtMostOnce(sources)) return undefined;
  const env = envOf(opts);
  // The skeleton reads' line tables (12 bytes a line: 96 MB for 1,000,000 clients), freed once
  // the parts hold copies of their own lines (or none, read elsewhere): see letGo.
  const read: LineTable[] = [];
  try {
    const skeletons: StreamedSkeleton['docs'] = [];
    const warnings: Diagnostic[] = [];
    const lines = new Map<string, LineTable>();
    const chars = sources.reduce((n, s) => n + s.text.length, 0);
    const keepLines = opts.bodiesHere?.(chars) ?? true;
    // Read elsewhere (worker threads), each from its file by offset: this thread then keeps
    // neither the texts (221 MB for 1,000,000 clients) nor any line table: the workers scan their parts.
    const fromFiles = !keepLines && sources.every((s) => s.at !== undefined);
    for (const source of sources) {
      const skeleton = parseFileSkeleton(source.file, source.text, env, false, takeLines(source));
      if (!skeleton) return undefined;
      if (skeleton.lines) read.push(skeleton.lines);
      warnings.push(...skeleton.parsed.warnings);
      const sd = skeleton.parsed.documents[0];
      if (!sd) continue;
      if (validateAgainstSchema(sd.value).length > 0) return undefined;
      skeletons.push({
        file: source.file,
        value: sd.value,
        deferred: skeleton.deferred,
        ...(fromFiles ? { at: source.at! } : {}),
      });
      // Read from their files (fromFiles), the parts' lines are scanned by the threads that read them:
      // copying each part's lines out of the skeleton's (8 million lines for 1,000,000 clients) was
      // ~0.35 s of this thread's serial start, while the workers wait on the service half the time.
      if (skeleton.lines && keepLines) lines.set(source.file, skeleton.lines);
    }
    // Warnings too: a second, whole load would say them again.
    if (warnings.length > 0) return undefined;
    const texts = new Map(fromFiles ? [] : sources.map((s) => [s.file, s.text]));
    const bodies = StreamedBodies.assemble(
      { files: sources.map((s) => s.file), docs: skeletons },
      env,
      (file) => texts.get(file) ?? '',
      (file) => lines.get(file),
    );
    // One environment gains nothing from it (it is loaded whole either way), and the whole load
    // overlaps its parse with the live read better.
    if (!bodies || bodies.envCount < 2) return undefined;
    const state = bodies.skeletonState;
    if (env instanceof PolicedEnv && env.read.size) state.envReferences = [...env.read].sort();
    bodies.bytes = chars;
    opts.onParsed?.(
      skeletons.map((s) => s.value),
      { bytes: bodies.bytes },
    );
    return { state, files: sources.map((s) => s.file), warnings, bodies };
  } catch (e) {
    if (e instanceof NotStreamable) return undefined;
    throw e;
  } finally {
    for (const t of read) for (const column of [t.starts, t.ends, t.indents]) letGo(column);
  }
}

/**
 * The skeleton of a streamed load as plain data (structured-cloneable, one message: each deferred
 * block's `container` is an object of its document's `value`): what a worker thread needs to read
 * environments itself (engine/plan-threads.ts), the texts of their blocks sent as they are planned.
 */
export interface StreamedSkeleton {
  files: string[];
  /** `at`: the document's file, when its parts are read from it by offset (ConfigSource.at). */
  docs: { file: string; value: unknown; deferred: DeferredBlock[]; at?: FileAt }[];
}

/**
 * One part of an environment handed to a worker thread (StreamedBodies.handOver): its text, or
 * nothing when the worker reads it from the file itself (ConfigSource.at).
 */
export interface HandedPart {
  text?: string;
}

/**
 * Whether the texts show at a glance that at most one environment holds clients or endpoints: the
 * words `clients` and `endpoints` occur once at most in all files together, and when both occur,
 * in one file as keys of one block mapping (each at a line's start at the same column, no line
 * between them less indented). Anything else says no, and the skeleton read decides.
 */
function bodyWordsAtMostOnce(sources: readonly ConfigSource[]): boolean {
  const found: { source: ConfigSource; at: number }[] = [];
  for (const source of sources) {
    const { text } = source;
    for (const word of ['clients', 'endpoints']) {
      for (let at = text.indexOf(word); at >= 0; at = text.indexOf(word, at + word.length)) {
        if (found.length === 2) return false;
        found.push({ source, at });
      }
    }
  }
  if (found.length < 2) return true;
  const [x, y] = found as [{ source: ConfigSource; at: number }, { source: ConfigSource; at: number }];
  if (x.source !== y.source) return false;
  const text = x.source.text;
  const [first, second] = x.at < y.at ? [x.at, y.at] : [y.at, x.at];
  const column = (at: number) => at - (text.lastIndexOf('\n', at - 1) + 1);
  const n = column(second);
  const keyAt = (at: number) => /^(?:clients|endpoints):/.test(text.slice(at, at + 10));
  if (n < 1 || column(first) !== n || !keyAt(first) || !keyAt(second)) return false;
  if (!/^ *$/.test(text.slice(second - n, second))) return false;
  // The skeleton read that follows (the whole load's or the streamed one's) needs the text's lines
  // anyway: built here (or as the file was read), they are scanned once (takeLines), and the walk is over their indents.
  const lines = (x.source.lines ??= lineTable(text));
  return !lessIndentedLine(lines, lineAt(lines, first), lineAt(lines, second), n);
}

/** The index of the line holding offset `at` (a binary search of the line starts). */
function lineAt(lines: LineTable, at: number): number {
  let lo = 0;
  let hi = lines.count - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >>> 1;
    if (lines.starts[mid]! <= at) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/**
 * Whether a line after line `from`, up to line `to`, is indented less than `n` spaces and holds
 * something (not blank, not a comment only): such a line ends a mapping whose keys are at column
 * `n`. A walk over the line table's indents, built once for the skeleton read too (100,000
 * clients, 22 MB: the walk from line feed to line feed before it was 21 ms of a plan's profile).
 */
function lessIndentedLine(lines: LineTable, from: number, to: number, n: number): boolean {
  const { indents } = lines;
  for (let li = from + 1; li < to; li++) {
    const indent = indents[li]!;
    if (indent >= 0 && indent < n) return true;
  }
  return false;
}

/** One occurrence of an environment in a document, with its deferred blocks. */
interface StreamedPart {
  /** The file's name and its text (a worker's holds only the blocks being read: StreamedBodies.take). */
  source: ConfigSource;
  doc: PlacedDocument;
  root: Raw;
  project: number;
  environment: number;
  /** The environment's mapping in the skeleton (its deferred keys hold `[]`). */
  container: Raw;
  blocks: DeferredBlock[];
  /**
   * The skeleton read's lines of the text, when kept for reading the blocks: the whole file's (a
   * whole load: buildingFast), or those of the part's blocks alone, from line `lineBase` on (a
   * streamed load: each environment's let go when it is taken).
   */
  lines?: LineTable;
  lineBase?: number;
}

/** Files the deferred blocks of a document under their environments; false when one cannot be named (the whole load says why). */
function groupDeferred(
  parts: Map<string, StreamedPart[]>,
  source: ConfigSource,
  doc: PlacedDocument,
  deferred: readonly DeferredBlock[],
  lines?: LineTable,
): boolean {
  const root = doc.value as Raw;
  let last: StreamedPart | undefined;
  for (const block of deferred) {
    if (last?.container === block.container) {
      last.blocks.push(block);
      continue;
    }
    const project = list(root.projects)[block.project];
    const slug = isObj(project) ? str(project.slug) : undefined;
    const type = str(block.container.type);
    if (slug === undefined || type === undefined) return false;
    const pe = projectEnvOf(slug, type);
    last = {
      source,
      doc,
      root,
      project: block.project,
      environment: block.environment,
      container: block.container,
      blocks: [block],
    };
    const inEnv = parts.get(pe);
    if (inEnv) inEnv.push(last);
    else parts.set(pe, [last]);
  }
  if (lines)
    for (const inEnv of parts.values())
      for (const part of inEnv)
        if (part.source !== source || part.lines) continue;
        else Object.assign(part, linesOfPart(lines, part.blocks));
  return true;
}

/** The lines of `blocks` (in order, of one part), copied out of their file's `lines`, and where they start. */
function linesOfPart(lines: LineTable, blocks: readonly DeferredBlock[]): { lines: LineTable; lineBase: number } {
  const from = blocks[0]?.firstLine ?? 0;
  const to = blocks.at(-1)?.endLine ?? from;
  return {
    lines: {
      starts: lines.starts.slice(from, to),
      ends: lines.ends.slice(from, to),
      indents: lines.indents.slice(from, to),
      count: to - from,
    },
    lineBase: from,
  };
}

/**
 * The clients and endpoints of a streamed load (loadDesiredStateStreamed), one environment at a
 * time: read from the text, checked against the schema and built by the same builder as a whole
 * load, then let go. What the whole load would report or warn of them throws NotStreamable.
 */
export class StreamedBodies {
  private readonly builder: Builder;
  private readonly parts: Map<string, StreamedPart[]>;
  private readonly env: EnvSource;
  private readonly state: DesiredState;
  private readonly skeleton: StreamedSkeleton;
  /** The texts' length in all (UTF-16 units): how large the configuration is (engine/plan-threads.ts). */
  bytes = 0;

  private constructor(
    builder: Builder,
    parts: Map<string, StreamedPart[]>,
    env: EnvSource,
    state: DesiredState,
    skeleton: StreamedSkeleton,
  ) {
    this.builder = builder;
    this.parts = parts;
    this.env = env;
    this.state = state;
    this.skeleton = skeleton;
  }

  /**
   * The bodies of a skeleton read: its documents built (no clients, no endpoints) and their
   * deferred blocks filed by environment; undefined when the builder has anything to say of the
   * skeleton (the whole load says it). `text(file)` gives a file's text; a worker thread's is
   * empty, the blocks' texts coming with each take(). `lines(file)`: the skeleton read's lines of
   * a file, kept so that this thread reads its blocks without scanning their lines again (a tenth
   * of a parse); a worker thread's blocks have none.
   */
  static assemble(
    skeleton: StreamedSkeleton,
    env: EnvSource,
    text: (file: string) => string,
    lines: (file: string) => LineTable | undefined = () => undefined,
  ): StreamedBodies | undefined {
    const builder = new Builder(skeleton.files);
    const parts = new Map<string, StreamedPart[]>();
    for (const { file, value, deferred, at } of skeleton.docs) {
      const sd: SourceDocument = { file, index: 0, value, usable: true, placedFromText: true, locate: unplaced };
      const doc = placed(sd);
      const steps = builder.addDocument(doc);
      while (!steps.next().done);
      const source = { file, text: text(file), ...(at ? { at } : {}) };
      if (!groupDeferred(parts, source, doc, deferred, lines(file))) return undefined;
    }
    const state = builder.finish();
    if (builder.diagnostics.length > 0 || builder.warnings.length > 0) return undefined;
    return new StreamedBodies(builder, parts, env, state, skeleton);
  }

  /** The state the skeleton builds: no clients, no endpoints. */
  get skeletonState(): DesiredState {
    return this.state;
  }

  /** How many environments hold deferred blocks. */
  get envCount(): number {
    return this.parts.size;
  }

  /** The skeleton, for a worker thread (StreamedBodies.assemble there); before any take(). */
  portable(): StreamedSkeleton {
    return this.skeleton;
  }

  /** The `${env:}` variables and, when policed, nothing else: a worker's bodies read them under the same policy. */
  get envVars(): EnvMap {
    return this.env instanceof PolicedEnv ? this.env.vars : this.env;
  }

  /** Whether `${env:}` is read under a policy (envVars: the variables it polices). */
  get envPoliced(): boolean {
    return this.env instanceof PolicedEnv;
  }

  /** The environments not taken yet. */
  remaining(): string[] {
    return [...this.parts.keys()];
  }

  /** The variables the bodies read so far (policed loads only). */
  get envRead(): string[] {
    return this.env instanceof PolicedEnv ? [...this.env.read] : [];
  }

  /** Counts variables a worker's bodies read as read here (envReferences). */
  noteEnvRead(names: readonly string[]): void {
    if (this.env instanceof PolicedEnv) for (const n of names) this.env.read.add(n);
  }

  /**
   * Environment `pe`'s deferred blocks for a worker thread, one per part (from its first block to
   * its last), in the order take() reads them, and lets go of them here: the worker reads the
   * environment (take with these), this thread only checks the environments left (finish). A part
   * read from its file is handed as its lines (HandedPart): the worker reads its text itself.
   */
  handOver(pe: string): HandedPart[] {
    const parts = this.parts.get(pe) ?? [];
    this.parts.delete(pe);
    // The worker threads read the blocks from their own texts: the parts' lines are let go.
    for (const left of this.parts.values()) for (const part of left) delete part.lines;
    return parts.map((part) =>
      part.source.text
        ? { text: part.source.text.slice(part.blocks[0]?.start ?? 0, part.blocks.at(-1)?.end ?? 0) }
        : {},
    );
  }

  /**
   * The clients and endpoints of environment `pe` (none for one the configuration does not hold),
   * sorted as in a whole load. `handed`: the parts as handOver gave them (in a worker thread). A
   * part whose file changed since the skeleton was read throws NotStreamable: the whole is loaded again.
   */
  async take(
    pe: string,
    handed?: readonly HandedPart[],
  ): Promise<{ clients: DesiredClient[]; endpoints: DesiredEndpoint[] }> {
    const parts = this.parts.get(pe) ?? [];
    this.parts.delete(pe);
    let t = 0;
    for (const part of parts) {
      const h = handed?.[t++];
      // A part of its own text (handed, or read from the file): its blocks at their offsets in it.
      const text = h?.text ?? (!part.source.text && part.source.at ? readPartOf(part, part.source.at) : undefined);
      const base = part.blocks[0]?.start ?? 0;
      // A text of its own is scanned for its lines by the reader (fastParseBlockChunks).
      const from =
        text === undefined
          ? part
          : {
              ...part,
              source: { file: part.source.file, text },
              blocks: part.blocks.map((b) => ({ ...b, start: b.start - base, end: b.end - base })),
              lines: undefined,
              lineBase: part.blocks[0]?.firstLine ?? 0,
            };
      // A pause after each chunk (CLIENTS_PER_PAUSE clients): the live read proceeds meanwhile.
      const steps = buildDeferred(this.builder, from, this.env);
      while (!steps.next().done) await new Promise<void>((resolve) => setImmediate(resolve));
    }
    return this.builder.takeEnv(pe);
  }

  /**
   * Reads and checks the environments not taken (out of the plan's scope: a whole load checks
   * them too); returns the state's `envReferences` completed with the variables the bodies read.
   */
  async finish(): Promise<string[] | undefined> {
    for (const pe of [...this.parts.keys()]) await this.take(pe);
    if (this.env instanceof PolicedEnv && this.env.read.size) this.state.envReferences = [...this.env.read].sort();
    return this.state.envReferences;
  }
}

/** The text of a part (its first block's start to its last's end) read from its file; NotStreamable when the file changed. */
function readPartOf(part: StreamedPart, at: FileAt): string {
  const text = readPart(at, part.blocks[0]?.start ?? 0, part.blocks.at(-1)?.end ?? 0);
  if (text === undefined) throw new NotStreamable(`${part.source.file} changed since it was read`);
  return text;
}

/**
 * Reads, checks against the schema and builds the deferred clients and endpoints of one
 * environment's occurrence, CLIENTS_PER_PAUSE items at a time (a pause after each), each chunk let
 * go before the next is read. What the whole load would report of them throws NotStreamable.
 */
function* buildDeferred(builder: Builder, part: StreamedPart, env: EnvSource): Generator<void, void, void> {
  const project = list(part.root.projects)[part.project] as Raw;
  const slug = str(project.slug)!;
  const segs: PathSegment[] = ['projects', part.project, 'environments', part.environment];
  // The schema's checks of a chunk: the document with this environment alone in it, holding the chunk.
  const alone = { ...part.root, projects: [{ ...project, environments: [part.container] }] };
  try {
    for (const block of part.blocks) {
      let from = 0;
      const { file, text } = part.source;
      for (const items of parseDeferredChunks(file, text, block, env, CLIENTS_PER_PAUSE, part.lines, part.lineBase)) {
        part.container[block.key] = items;
        if (validateAgainstSchema(alone).length > 0) throw new NotStreamable('the schema refuses a client or endpoint');
        builder.addStreamedBody(part.doc, slug, part.container, segs, block.key, from);
        part.container[block.key] = [];
        from += items.length;
        yield;
      }
    }
  } finally {
    for (const block of part.blocks) part.container[block.key] = [];
  }
}

/** `${env:}` over `vars` under the policy's allowlist. */
export function policedEnv(vars: EnvMap, policy: OperatorPolicy): PolicedEnv {
  return new PolicedEnv(
    vars,
    (name) => envAllowed(policy, name),
    (name) =>
      `env.allow: [${name}] in the operator policy file (--policy FILE / KMS_SYNC_POLICY), KMS_SYNC_ENV_ALLOW=${name} or --allow-env ${name}`,
  );
}

function describeReadError(err: unknown): string {
  const e = err as NodeJS.ErrnoException;
  if (e.code === 'ELOOP') return 'is a symbolic link (not followed)';
  return e.code === 'EACCES' ? 'permission denied' : e.code === 'EISDIR' ? 'is a folder' : (e.code ?? e.message);
}

/** Same as loadDesiredState for texts already in memory (stdin, tests). */
export function loadDesiredStateFromSources(sources: ConfigSource[], opts: { env?: EnvMap } = {}): DesiredState {
  return buildDesiredState(sources, opts.env ?? process.env, [], [], []);
}

// ------------------------------------------------------------------------------------------------

/** Name that always means the default store (same as DEFAULT_STORE_NAME of the secrets layer). */
export const DEFAULT_STORE_NAME = 'default';

type Raw = Record<string, unknown>;

const isObj = (v: unknown): v is Raw => typeof v === 'object' && v !== null && !Array.isArray(v);
const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);
const int = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);
const byName = (a: { name: string }, b: { name: string }): number => cmp(a.name, b.name);

interface Collected extends Diagnostic {
  fileIndex: number;
  order: number;
}

type Stage = 'parse' | 'schema';

interface ProjectEntry {
  def?: DesiredProject;
  refs: SourceLocation[];
  /** Occurrences marked `external: true` (defined elsewhere). */
  external?: SourceLocation[];
}

interface EnvEntry {
  project: string;
  def?: DesiredEnv;
  refs: SourceLocation[];
}

/** A document of either front end, with a way to place its field paths. */
interface PlacedDocument {
  file: string;
  index: number;
  value: unknown;
  at(segments: readonly PathSegment[], atKey?: boolean): PlaceOnUse;
  /** Its places do not read `value` (SourceDocument.placedFromText): the builder drops each client of it once built. */
  dropsBuilt?: true;
}

interface PendingRef {
  projectEnv: string;
  name: string;
  /** The resource that holds the reference, and the field's path in it: placed only when reported (most references resolve). */
  within: PlaceOnUse;
  field: readonly PathSegment[];
}

const TEMPLATE_FIELD: readonly PathSegment[] = ['template'];
const STORE_FIELD: readonly PathSegment[] = ['secret', 'store'];

class Builder {
  readonly diagnostics: Collected[] = [];
  /** Document paths with a syntax/interpolation error ('parse') or a schema error ('schema'). */
  private readonly flagged = { parse: new Set<string>(), schema: new Set<string>() };
  /** Some input could not be interpreted: skip "not defined anywhere" checks (they would be noise). */
  incomplete = false;

  private readonly fileIndex = new Map<string, number>();
  private readonly stores = new Map<string, StoreDeclaration>();
  private owner: { value: string; at: SourceLocation } | undefined;
  private readonly settings = new Map<keyof ConfigSettings, { value: boolean; at: SourceLocation }>();
  private defaultStore: StoreDeclaration | undefined;
  private readonly projects = new Map<string, ProjectEntry>();
  private readonly envs = new Map<string, EnvEntry>();
  private readonly templates = new Map<string, DesiredTemplate>();
  private readonly templateNames = new Map<string, string[]>();
  /**
   * A one-range whitelist's canonical list, frozen, by the configured string: the clients that
   * name one range (most of them, and often the same one) share its list instead of two arrays
   * and a canonicalCidr each. Read only downstream (DesiredClient.ipWhitelist is readonly).
   */
  private readonly oneRange = new Map<string, readonly string[]>();
  /** By environment, then name: no joined key string per client (100,000 in a large configuration). */
  private readonly clients = new Map<string, Map<string, DesiredClient>>();
  private readonly endpoints = new Map<string, DesiredEndpoint>();
  private readonly templateRefs: PendingRef[] = [];
  private readonly storeRefs: PendingRef[] = [];
  /** Said, not refused (see finish). */
  readonly warnings: Diagnostic[] = [];
  /**
   * The document being added lets go of each client once built (PlacedDocument.dropsBuilt): the
   * parsed tree and the model are then never both whole in memory (for 100,000 clients, ~75 MB
   * of tree beside the model at the load's peak).
   */
  private dropBuilt = false;

  constructor(files: readonly string[]) {
    for (const [i, f] of files.entries()) this.fileIndex.set(f, i);
  }

  private flagKey(file: string, doc: number, p: string): string {
    return `${file}\u0000${doc}\u0000${p}`;
  }

  report(d: Diagnostic, doc = -1, stage?: Stage): void {
    if (stage) this.flagged[stage].add(this.flagKey(d.file, doc, d.path));
    this.diagnostics.push({ ...d, fileIndex: this.fileIndex.get(d.file) ?? -1, order: this.diagnostics.length });
  }

  /** Whether an earlier stage already reported a problem at this path (avoids double reports). */
  isFlagged(file: string, doc: number, p: string, stages: readonly Stage[] = ['parse', 'schema']): boolean {
    const key = this.flagKey(file, doc, p);
    return stages.some((s) => this.flagged[s].has(key));
  }

  // -------------------------------------------------------------------------------- documents

  /**
   * A generator that pauses every CLIENTS_PER_PAUSE clients: a plan reads the live state while
   * the configuration loads, and that read needs the event loop now and then (buildDesiredState).
   */
  *addDocument(sd: PlacedDocument): Generator<void, void, void> {
    const root = sd.value;
    if (!isObj(root)) return; // schema already reported non-mapping documents
    this.dropBuilt = sd.dropsBuilt === true;
    const at = (segs: readonly PathSegment[], atKey = false): PlaceOnUse => sd.at(segs, atKey);
    const error = (segs: PathSegment[], message: string, opts: { atKey?: boolean; value?: boolean } = {}): void => {
      const loc = at(segs, opts.atKey);
      if (opts.value && this.isFlagged(sd.file, sd.index, loc.path)) return;
      this.report({ ...fields(loc), message }, sd.index);
    };

    if (typeof root.owner === 'string') this.addOwner(root.owner, at(['owner']));
    if (isObj(root.settings) && typeof root.settings.allowLocalStoreInCi === 'boolean') {
      this.addSetting(
        'allowLocalStoreInCi',
        root.settings.allowLocalStoreInCi,
        at(['settings', 'allowLocalStoreInCi']),
      );
    }
    for (const [i, s] of list(root.stores).entries()) this.addStore(s, ['stores', i], at);
    const projects = list(root.projects);
    for (let i = 0; i < projects.length; i++) yield* this.addProject(projects[i], ['projects', i], at, error);
  }

  /** One configuration has one owner: files that declare it must agree. */
  private addOwner(value: string, loc: SourceLocation): void {
    if (!this.owner) this.owner = { value, at: loc };
    else if (this.owner.value !== value) {
      this.report({
        ...fields(loc),
        message: `owner "${value}" differs from owner "${this.owner.value}" declared at ${this.owner.at.file}:${this.owner.at.line}; a configuration has one owner`,
      });
    }
  }

  /** One configuration, one value per setting: files that set it must agree. */
  private addSetting(name: keyof ConfigSettings, value: boolean, loc: SourceLocation): void {
    const first = this.settings.get(name);
    if (!first) this.settings.set(name, { value, at: loc });
    else if (first.value !== value) {
      this.report({
        ...fields(loc),
        message: `settings.${name} is ${value} here but ${first.value} at ${first.at.file}:${first.at.line}; a configuration has one value per setting`,
      });
    }
  }

  private addStore(s: unknown, segs: PathSegment[], at: (s: PathSegment[]) => SourceLocation): void {
    if (!isObj(s)) return;
    const name = str(s.name);
    if (name === undefined) return;
    const decl: StoreDeclaration = { name, uri: str(s.uri) ?? '', source: at(segs) };
    if (isObj(s.options)) decl.options = s.options as JsonObject;
    if (s.default === true) decl.default = true;
    const first = this.stores.get(name);
    if (first?.source && decl.source) {
      this.report({
        ...fields(decl.source),
        message: `store "${name}" is defined twice: ${twoPlaces(first.source, decl.source)}`,
      });
      return;
    }
    this.stores.set(name, decl);
    if (decl.default) {
      const other = this.defaultStore;
      if (other?.source && decl.source) {
        this.report({
          ...fields(decl.source),
          message:
            `only one store can be the default: "${other.name}" at ${formatPlace(other.source)} and ` +
            `"${name}" at ${formatPlace(decl.source)} both set default: true`,
        });
      } else {
        this.defaultStore = decl;
      }
    }
  }

  private *addProject(
    p: unknown,
    segs: PathSegment[],
    at: (s: readonly PathSegment[], atKey?: boolean) => PlaceOnUse,
    error: (s: PathSegment[], m: string, o?: { atKey?: boolean; value?: boolean }) => void,
  ): Generator<void, void, void> {
    if (!isObj(p)) return;
    const slug = str(p.slug);
    if (slug === undefined) return;
    const entry = this.projects.get(slug) ?? { refs: [] };
    this.projects.set(slug, entry);
    const here = at(segs);
    // `external: yes` is reported by the schema; read as meant, it adds no "not defined" error.
    const external = p.external === true || ('external' in p && typeof p.external !== 'boolean');
    if (p.external === true && 'name' in p) {
      error(
        [...segs, 'external'],
        `project "${slug}" is marked external (defined elsewhere) and defined here (with "name") at once: ` +
          'remove "external: true" to define it in this configuration, or remove name, description and protected to only reference it',
        { atKey: true },
      );
    }
    if (external && !('name' in p)) {
      (entry.external ??= []).push(here);
    } else if ('name' in p) {
      const project: DesiredProject = { slug, name: str(p.name) ?? '', source: here };
      const description = str(p.description);
      if (description !== undefined) project.description = description;
      if (p.protected === true) project.protected = true;
      if (entry.def?.source) {
        this.report({
          ...fields(here),
          message:
            `project "${slug}" is defined twice (with "name"): ${twoPlaces(entry.def.source, here)}; ` +
            'other occurrences must only reference it (slug and environments)',
        });
      } else {
        entry.def = project;
      }
    } else {
      entry.refs.push(here);
    }
    const envs = list(p.environments);
    for (let j = 0; j < envs.length; j++) yield* this.addEnv(slug, envs[j], [...segs, 'environments', j], at, error);
  }

  private *addEnv(
    project: string,
    e: unknown,
    segs: PathSegment[],
    at: (s: readonly PathSegment[], atKey?: boolean) => PlaceOnUse,
    error: (s: PathSegment[], m: string, o?: { atKey?: boolean; value?: boolean }) => void,
  ): Generator<void, void, void> {
    if (!isObj(e)) return;
    const type = str(e.type);
    if (type === undefined) return;
    const projectEnv = projectEnvOf(project, type);
    const entry = this.envs.get(projectEnv) ?? { project, refs: [] };
    this.envs.set(projectEnv, entry);
    const here = at(segs);
    if ('url' in e) {
      const env: DesiredEnv = { project, type, projectEnv, url: str(e.url) ?? '', source: here };
      if (e.protected === true) env.protected = true;
      if (entry.def?.source) {
        this.report({
          ...fields(here),
          message:
            `environment ${projectEnv} is defined twice (with "url"): ${twoPlaces(entry.def.source, here)}; ` +
            'other occurrences must only reference it (type, templates, clients, endpoints)',
        });
      } else {
        entry.def = env;
      }
    } else {
      entry.refs.push(here);
    }

    list(e.templates).forEach((t, k) => {
      if (!isObj(t)) return;
      const name = str(t.name);
      if (name === undefined) return;
      const template: DesiredTemplate = {
        projectEnv,
        name,
        rateLimitDay: int(t.rateLimitDay) ?? 0,
        source: here.child('templates', k),
      };
      const maxClients = int(t.maxClients);
      if (maxClients !== undefined) template.maxClients = maxClients;
      if (t.protected === true) template.protected = true;
      const id = `${projectEnv}\u0000${name}`;
      const first = this.templates.get(id);
      if (first?.source && template.source) {
        this.report({
          ...fields(template.source),
          message: `template "${name}" in environment ${projectEnv} is defined twice: ${twoPlaces(first.source, template.source)}`,
        });
        return;
      }
      this.templates.set(id, template);
      const names = this.templateNames.get(projectEnv) ?? [];
      names.push(name);
      this.templateNames.set(projectEnv, names);
    });
    yield* this.addEnvBody(projectEnv, list(e.clients), list(e.endpoints), here, error);
  }

  /**
   * An environment's clients and endpoints (a streamed load adds them after its skeleton, a chunk
   * at a time: addStreamedBody); `from` is the index of the first in its document's list.
   */
  private *addEnvBody(
    projectEnv: string,
    clients: unknown[],
    endpoints: unknown[],
    here: PlaceOnUse,
    error: (s: PathSegment[], m: string, o?: { atKey?: boolean; value?: boolean }) => void,
    from = 0,
  ): Generator<void, void, void> {
    for (let k = 0; k < clients.length; k++) {
      this.addClient(projectEnv, clients[k], here.child('clients', from + k), error);
      if (this.dropBuilt) clients[k] = null;
      if (k % CLIENTS_PER_PAUSE === CLIENTS_PER_PAUSE - 1) yield;
    }

    endpoints.forEach((ep, i) => {
      const k = from + i;
      if (!isObj(ep)) return;
      const method = str(ep.method);
      const route = str(ep.path);
      if (method === undefined || route === undefined) return;
      const endpoint: DesiredEndpoint = {
        projectEnv,
        method: method.toUpperCase(),
        path: route,
        source: here.child('endpoints', k),
      };
      for (const f of ['name', 'description'] as const) {
        const v = str(ep[f]);
        if (v !== undefined) endpoint[f] = v;
      }
      for (const f of ['request', 'response', 'metadata'] as const) {
        if (isObj(ep[f])) endpoint[f] = ep[f] as JsonObject;
      }
      if (ep.protected === true) endpoint.protected = true;
      const mp = methodPath(method, route);
      const id = `${projectEnv}\u0000${mp}`;
      const first = this.endpoints.get(id);
      if (first?.source && endpoint.source) {
        this.report({
          ...fields(endpoint.source),
          message: `endpoint ${mp} in environment ${projectEnv} is defined twice: ${twoPlaces(first.source, endpoint.source)}`,
        });
        return;
      }
      this.endpoints.set(id, endpoint);
    });
  }

  /** One client; `here` is its place (its field paths are built only for a problem to report). */
  private addClient(
    projectEnv: string,
    c: unknown,
    here: PlaceOnUse,
    error: (s: PathSegment[], m: string, o?: { atKey?: boolean; value?: boolean }) => void,
  ): void {
    if (!isObj(c)) return;
    const name = str(c.name);
    if (name === undefined) return;
    const template = str(c.template);
    const client: DesiredClient = { projectEnv, name, template: template ?? '', keys: [], source: here };
    // A template already defined in this environment needs no check in finish(): that check passes
    // for any name in templateNames, which only grows. Usually the templates come first.
    if (template !== undefined && !this.templateNames.get(projectEnv)?.includes(template)) {
      this.templateRefs.push({ projectEnv, name: template, within: here, field: TEMPLATE_FIELD });
    }
    const type = str(c.type);
    if (type !== undefined) client.type = type;
    const listed: unknown = c.ipWhitelist;
    const one = Array.isArray(listed) && listed.length === 1 && typeof listed[0] === 'string' ? listed[0] : undefined;
    const shared = one !== undefined ? this.oneRange.get(one) : undefined;
    if (shared !== undefined) client.ipWhitelist = shared;
    else if (Array.isArray(listed)) {
      const ranges: string[] = [];
      // Indexed loops in this method: it runs once per client, mostly before V8 optimizes it,
      // where a callback is a closure per client and a for-of an iterator result per item.
      for (let m = 0; m < listed.length; m++) {
        const ip: unknown = listed[m];
        if (typeof ip !== 'string') continue;
        try {
          ranges.push(canonicalCidr(ip));
        } catch (err) {
          error([...here.segments(), 'ipWhitelist', m], normalizeMessage(err), { value: true });
        }
      }
      if (one !== undefined && ranges.length === 1)
        this.oneRange.set(one, (client.ipWhitelist = Object.freeze(ranges)));
      else client.ipWhitelist = ranges.length < 2 ? exactly(ranges) : sortInPlace([...new Set(ranges)], cmp);
    }
    if (isObj(c.metadata)) client.metadata = c.metadata as JsonObject;
    if (c.protected === true) client.protected = true;

    // An array, not a map: a client has a few keys (a duplicate is found by a scan).
    const keys: DesiredKey[] = [];
    const keyItems = list(c.keys);
    for (let m = 0; m < keyItems.length; m++) {
      const k = keyItems[m];
      if (!isObj(k)) continue;
      const keyName = str(k.name);
      if (keyName === undefined) continue;
      const keyAt = here.child('keys', m);
      const key: DesiredKey = { projectEnv, client: name, name: keyName, source: keyAt };
      const ttl = str(k.ttl);
      const expiresAt = str(k.expiresAt);
      if (ttl !== undefined) {
        try {
          parseTtl(ttl);
          key.ttl = ttl.trim();
        } catch (err) {
          error([...keyAt.segments(), 'ttl'], normalizeMessage(err), { value: true });
        }
      }
      if (expiresAt !== undefined) {
        try {
          key.expiresAt = canonicalTimestamp(expiresAt);
        } catch (err) {
          error([...keyAt.segments(), 'expiresAt'], normalizeMessage(err), { value: true });
        }
      }
      if (ttl !== undefined && expiresAt !== undefined) {
        error([...keyAt.segments(), 'expiresAt'], '"expiresAt" cannot be combined with "ttl": set only one of them', {
          atKey: true,
        });
      }
      if (typeof k.autoRotate === 'boolean') key.autoRotate = k.autoRotate;
      if (isObj(k.rotation)) {
        const rotation: { window?: string; overlap?: string } = {};
        for (const field of ['window', 'overlap'] as const) {
          const v = str(k.rotation[field]);
          if (v === undefined) continue;
          try {
            if (!(field === 'overlap' && /^\s*0+[smhdw]\s*$/.test(v))) parseTtl(v);
            rotation[field] = v.trim();
          } catch (err) {
            error([...keyAt.segments(), 'rotation', field], normalizeMessage(err), { value: true });
          }
        }
        key.rotation = rotation;
      }
      if (isObj(k.secret)) {
        const secret: SecretTarget = {};
        const store = str(k.secret.store);
        const secretName = str(k.secret.name);
        if (store !== undefined) {
          secret.store = store;
          this.storeRefs.push({ projectEnv, name: store, within: keyAt, field: STORE_FIELD });
        }
        if (secretName !== undefined) secret.name = secretName;
        key.secret = secret;
      }
      if (k.protected === true) key.protected = true;
      const first = indexOfName(keys, keyName);
      if (first >= 0 && keys[first]!.source && key.source) {
        this.report({
          ...fields(key.source),
          message:
            `key "${keyName}" of client "${name}" in environment ${projectEnv} is defined twice: ` +
            twoPlaces(keys[first]!.source, key.source),
        });
        continue;
      }
      if (first >= 0) keys[first] = key;
      else keys.push(key);
    }
    client.keys = keys.length < 2 ? exactly(keys) : sortInPlace(exactly(keys), byName);

    let inEnv = this.clients.get(projectEnv);
    if (inEnv === undefined) this.clients.set(projectEnv, (inEnv = new Map()));
    const first = inEnv.get(name);
    if (first?.source && client.source) {
      this.report({
        ...fields(client.source),
        message: `client "${name}" in environment ${projectEnv} is defined twice: ${twoPlaces(first.source, client.source)}`,
      });
      return;
    }
    inEnv.set(name, client);
  }

  /**
   * A chunk of a streamed environment's clients or endpoints (`key`; read after the skeleton:
   * buildDeferred), as addEnv adds them in a whole load; `segs` is the environment's field path
   * in its document, `from` the chunk's first index in the list.
   */
  addStreamedBody(
    sd: PlacedDocument,
    project: string,
    e: Raw,
    segs: PathSegment[],
    key: 'clients' | 'endpoints',
    from: number,
  ): void {
    const type = str(e.type);
    if (type === undefined) return;
    this.dropBuilt = sd.dropsBuilt === true;
    const error = (path: PathSegment[], message: string, opts: { atKey?: boolean; value?: boolean } = {}): void => {
      const loc = sd.at(path, opts.atKey);
      if (opts.value && this.isFlagged(sd.file, sd.index, loc.path)) return;
      this.report({ ...fields(loc), message }, sd.index);
    };
    const items = list(e[key]);
    const steps = this.addEnvBody(
      projectEnvOf(project, type),
      key === 'clients' ? items : [],
      key === 'endpoints' ? items : [],
      sd.at(segs),
      error,
      from,
    );
    while (!steps.next().done);
  }

  /**
   * A streamed environment's clients and endpoints, in the order finish() gives them, let go of by
   * the builder; what finish() would say of them (an undefined template or store, a template's
   * client maximum passed) it cannot place here: NotStreamable, and the caller loads the whole.
   */
  takeEnv(pe: string): { clients: DesiredClient[]; endpoints: DesiredEndpoint[] } {
    if (this.diagnostics.length > 0 || this.templateRefs.length > 0)
      throw new NotStreamable('a client names a template its environment does not define');
    for (const ref of this.storeRefs)
      if (!this.stores.has(ref.name) && ref.name !== DEFAULT_STORE_NAME)
        throw new NotStreamable('a key names a store that is not declared');
    this.storeRefs.length = 0;
    const inEnv = this.clients.get(pe);
    this.clients.delete(pe);
    const clients = inEnv ? [...inEnv.values()].sort(byName) : [];
    const counts = new Map<string, number>();
    for (let i = 0; i < clients.length; i++) {
      const t = clients[i]!.template;
      counts.set(t, (counts.get(t) ?? 0) + 1);
    }
    for (const [name, count] of counts) {
      const t = this.templates.get(`${pe}\u0000${name}`);
      if (t?.maxClients !== undefined && t.maxClients >= 1 && count > t.maxClients)
        throw new NotStreamable('a template has more clients than its maxClients');
    }
    const endpoints: DesiredEndpoint[] = [];
    for (const [id, x] of this.endpoints) {
      if (x.projectEnv !== pe) continue;
      endpoints.push(x);
      this.endpoints.delete(id);
    }
    endpoints.sort((a, b) => cmp(a.path, b.path) || cmp(a.method, b.method));
    return { clients, endpoints };
  }

  // -------------------------------------------------------------------------------- cross-checks

  finish(): DesiredState {
    if (!this.incomplete) {
      for (const [slug, entry] of this.projects) {
        if (entry.def && entry.external) {
          // A project is this configuration's (it may create, rename and delete it) or another's.
          for (const ext of entry.external) {
            this.report({
              ...fields(ext),
              message:
                `project "${slug}" is marked external here (defined elsewhere) but this configuration defines it (with "name"): ` +
                `defined at ${formatPlace(entry.def.source!)}, external at ${formatPlace(ext)}; ` +
                'remove "external: true", or the definition (name, description, protected) to only reference it',
            });
          }
          continue;
        }
        if (entry.def || entry.external) continue;
        for (const ref of entry.refs) {
          this.report({
            ...fields(ref),
            message: `project "${slug}" is referenced here but not defined in any file (exactly one occurrence must set "name")`,
          });
        }
      }
      for (const [projectEnv, entry] of this.envs) {
        const project = this.projects.get(entry.project);
        if (entry.def || !(project?.def || project?.external)) continue;
        for (const ref of entry.refs) {
          this.report({
            ...fields(ref),
            message: `environment ${projectEnv} is referenced here but not defined in any file (exactly one occurrence must set "url")`,
          });
        }
      }
      // Indexed loop and Map#forEach below: one pass per client, mostly before V8 optimizes it,
      // where a for-of allocates an iterator result per item.
      for (let i = 0; i < this.templateRefs.length; i++) {
        const ref = this.templateRefs[i]!;
        if (!this.envs.get(ref.projectEnv)?.def) continue;
        const names = this.templateNames.get(ref.projectEnv) ?? [];
        if (names.includes(ref.name)) continue;
        const guess = closest(ref.name, names);
        const known = names.length > 0 ? `defined: ${names.join(', ')}` : 'no templates are defined in it';
        this.report({
          ...fields(ref.within.child(ref.field[0]!, ref.field[1])),
          message:
            `template "${ref.name}" is not defined in environment ${ref.projectEnv} ` +
            `(${known}${guess ? `; did you mean "${guess}"?` : ''})`,
        });
      }
      // A declared client maximum should hold for the clients this configuration names: said here,
      // not learnt from a 409 halfway through an apply.
      const named = new Map<string, Map<string, number>>();
      for (const [projectEnv, inEnv] of this.clients) {
        const counts = new Map<string, number>();
        for (const c of inEnv.values()) counts.set(c.template, (counts.get(c.template) ?? 0) + 1);
        named.set(projectEnv, counts);
      }
      for (const t of this.templates.values()) {
        const count = named.get(t.projectEnv)?.get(t.name) ?? 0;
        if (t.maxClients === undefined || t.maxClients < 1 || count <= t.maxClients || !t.source) continue;
        // A warning: the interface leaves what the service does at the maximum unspecified.
        this.warnings.push({
          ...fields(t.source),
          message:
            `template "${t.name}" in environment ${t.projectEnv} allows ${t.maxClients} client(s) (maxClients), but ${count} clients name it: ` +
            'the service may refuse the clients beyond it; raise maxClients or move clients to another template',
        });
      }
      const storeNames = [...this.stores.keys()];
      for (const ref of this.storeRefs) {
        if (this.stores.has(ref.name) || ref.name === DEFAULT_STORE_NAME) continue;
        const guess = closest(ref.name, [...storeNames, DEFAULT_STORE_NAME]);
        const known =
          storeNames.length > 0
            ? `declared: ${storeNames.join(', ')}${guess ? `; did you mean "${guess}"?` : ''}`
            : `no stores are declared; leave secret.store out, or use "${DEFAULT_STORE_NAME}", for the default store`;
        this.report({
          ...fields(ref.within.child(ref.field[0]!, ref.field[1])),
          message: `store "${ref.name}" is not declared under stores (${known})`,
        });
      }
    }

    const projects = [...this.projects.values()].flatMap((e) => (e.def ? [e.def] : []));
    const externalProjects = [...this.projects].flatMap(([slug, e]) =>
      e.external && !e.def ? [{ slug, source: e.external[0]! }] : [],
    );
    const envs = [...this.envs.values()].flatMap((e) => (e.def ? [e.def] : []));
    return {
      projects: projects.sort((a, b) => cmp(a.slug, b.slug)),
      ...(externalProjects.length ? { externalProjects: externalProjects.sort((a, b) => cmp(a.slug, b.slug)) } : {}),
      envs: envs.sort((a, b) => cmp(a.projectEnv, b.projectEnv)),
      templates: [...this.templates.values()].sort((a, b) => cmp(a.projectEnv, b.projectEnv) || cmp(a.name, b.name)),
      clients: [...this.clients.values()]
        .flatMap((inEnv) => [...inEnv.values()])
        .sort((a, b) => cmp(a.projectEnv, b.projectEnv) || cmp(a.name, b.name)),
      endpoints: [...this.endpoints.values()].sort(
        (a, b) => cmp(a.projectEnv, b.projectEnv) || cmp(a.path, b.path) || cmp(a.method, b.method),
      ),
      stores: [...this.stores.values()].sort((a, b) => cmp(a.name, b.name)),
      ...(this.owner ? { owner: this.owner.value } : {}),
      ...(this.settings.size
        ? { settings: Object.fromEntries([...this.settings].map(([k, v]) => [k, v.value])) as ConfigSettings }
        : {}),
    };
  }

  sortedDiagnostics(): Diagnostic[] {
    return [...this.diagnostics]
      .sort((a, b) => a.fileIndex - b.fileIndex || a.line - b.line || a.column - b.column || a.order - b.order)
      .map(({ file, line, column, path: p, message }) => ({ file, line, column, path: p, message }));
  }
}

/**
 * A kept copy of an array filled by push: V8 gives a pushed array room for 16 more elements
 * (~150 bytes), and a client's one key and one CIDR range would keep it (two per client).
 */
function exactly<T>(items: T[]): T[] {
  return items.length === 0 ? [] : items.slice();
}

/** `items.findIndex((x) => x.name === name)` without a closure per call (once per key). */
function indexOfName(items: readonly { name: string }[], name: string): number {
  for (let i = 0; i < items.length; i++) if (items[i]!.name === name) return i;
  return -1;
}

function twoPlaces(first: SourceLocation, second: SourceLocation): string {
  return `at ${formatPlace(first)} and at ${formatPlace(second)}`;
}

function normalizeMessage(err: unknown): string {
  if (err instanceof NormalizeError) return err.message;
  return err instanceof Error ? err.message : String(err);
}

/** Places field paths of one document: line, column and shown path. */
interface Locator {
  locate(segments: readonly PathSegment[], atKey: boolean): { line: number; column: number; path: string };
}

/** A place at a field path of its own (PlaceOnUse.root): the one allocation a child place does not repeat. */
interface RootPlace {
  readonly segments: readonly PathSegment[];
  readonly locator: Locator;
  readonly atKey: boolean;
}

/**
 * A source location placed when first read (a problem is reported, a duplicate is named): a clean
 * load of 10,000 clients places none of its 30,000 resources, so the file's offsets are not even
 * recorded (source.ts), and a CDKTF place costs a scan of a large cdk.tf.json. A class, not an
 * object with getters: 30,000 of those cost more than the whole builder. Its fields live on the
 * prototype, so a spread copies only `file`: copy one with `fields()`.
 */
class PlaceOnUse implements SourceLocation {
  readonly file: string;
  /**
   * A place at a field path of its own (RootPlace), or the place this one is under (a client's
   * key: its client) with up to two more segments: a child keeps no locator of its own (five
   * fields, not seven: 16 bytes less for each of the 200,000 places of 100,000 clients and keys).
   */
  private readonly base: RootPlace | PlaceOnUse;
  private readonly a: PathSegment | undefined;
  private readonly b: PathSegment | undefined;
  private found: { line: number; column: number; path: string } | undefined;

  constructor(file: string, base: RootPlace | PlaceOnUse, a?: PathSegment, b?: PathSegment) {
    this.file = file;
    this.base = base;
    this.a = a;
    this.b = b;
  }

  /** A place at `segments` (or at their last key, `atKey`), found by `locator` when asked. */
  static root(file: string, locator: Locator, segments: readonly PathSegment[], atKey: boolean): PlaceOnUse {
    return new PlaceOnUse(file, { segments, locator, atKey });
  }

  /**
   * A place under this one: `a` then `b`. A client and its keys are placed under their
   * environment this way, without a path array each (200,000 of them for 100,000 clients).
   */
  child(a: PathSegment, b?: PathSegment): PlaceOnUse {
    return new PlaceOnUse(this.file, this, a, b);
  }

  /** The field path from the document's root. */
  segments(): readonly PathSegment[] {
    const base = this.base instanceof PlaceOnUse ? this.base.segments() : this.base.segments;
    if (this.a === undefined) return base;
    return this.b === undefined ? [...base, this.a] : [...base, this.a, this.b];
  }

  /** The root place's locator and whether this place is at a key (only a root place is). */
  private rootOf(): RootPlace {
    return this.base instanceof PlaceOnUse ? this.base.rootOf() : this.base;
  }

  private place(): { line: number; column: number; path: string } {
    if (this.found) return this.found;
    const root = this.rootOf();
    const atKey = this.base instanceof PlaceOnUse ? false : root.atKey;
    return (this.found = root.locator.locate(this.segments(), atKey));
  }

  get line(): number {
    return this.place().line;
  }

  get column(): number {
    return this.place().column;
  }

  get path(): string {
    return this.place().path;
  }

  toJSON(): SourceLocation {
    return fields(this);
  }
}

/** A location's plain fields (to spread into a diagnostic). */
function fields(loc: SourceLocation): SourceLocation {
  return { file: loc.file, line: loc.line, column: loc.column, path: loc.path };
}

function placed(sd: SourceDocument): PlacedDocument {
  const locator = locatorOf(sd.locate);
  const file = sd.file;
  return {
    file,
    index: sd.index,
    value: sd.value,
    at: (segs, atKey = false) => PlaceOnUse.root(file, locator, segs, atKey),
    ...(sd.placedFromText ? { dropsBuilt: true as const } : {}),
  };
}

/**
 * The locator of a document's places, made apart from `placed`: a closure there would share its
 * scope with `at` and keep the SourceDocument, so the whole parsed tree, alive for as long as any
 * loaded resource (each holds its place).
 */
function locatorOf(locate: SourceDocument['locate']): Locator {
  return { locate: (segs, atKey) => ({ ...locate(segs, atKey), path: formatPath(segs) }) };
}

/** The one diagnostic of a file that is plain text, not YAML or JSON configuration (its content is not shown). */
export const SHAPELESS =
  'not a kms-sync configuration: its top level is plain text, not a mapping (the content is not shown; a configuration file starts with apiVersion: kms-sync/v1)';

/** Clients the builder handles between two pauses (a few milliseconds of work). */
const CLIENTS_PER_PAUSE = 500;

function buildDesiredState(
  sources: readonly ConfigSource[],
  env: EnvSource,
  pre: readonly Diagnostic[],
  foreign: readonly ForeignDocument[],
  warnings: Diagnostic[],
): DesiredState {
  const steps = building(sources, env, pre, foreign, warnings);
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
  }
}

/**
 * buildDesiredState, giving the event loop a turn at each pause: `onParsed` (a plan's read of the
 * live state, started as soon as the environments are known) then runs beside the schema checks
 * and the builder instead of after them.
 */
async function buildDesiredStatePaced(
  sources: readonly ConfigSource[],
  env: EnvSource,
  pre: readonly Diagnostic[],
  foreign: readonly ForeignDocument[],
  warnings: Diagnostic[],
  onParsed: (documents: unknown[]) => void,
): Promise<DesiredState> {
  const steps = building(sources, env, pre, foreign, warnings, onParsed);
  for (;;) {
    const step = steps.next();
    if (step.done) return step.value;
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
}

function* building(
  sources: readonly ConfigSource[],
  env: EnvSource,
  pre: readonly Diagnostic[],
  foreign: readonly ForeignDocument[],
  warnings: Diagnostic[],
  onParsed?: (documents: unknown[]) => void,
): Generator<void, DesiredState, void> {
  // The documents are told once: a fast attempt that gave way told them already.
  let told = false;
  const tell = onParsed
    ? (documents: unknown[]) => {
        if (told) return;
        told = true;
        onParsed(documents);
      }
    : undefined;
  if (pre.length === 0 && foreign.length === 0) {
    const fast = yield* buildingFast(sources, env, warnings, tell);
    if (fast) return fast;
  }
  const builder = new Builder([...sources.map((s) => s.file), ...foreign.map((d) => d.file)]);
  for (const d of pre) builder.report(d);
  if (pre.length > 0) builder.incomplete = true;

  const parsedDocs: SourceDocument[] = [];
  for (const source of sources) {
    const parsed = parseFile(source.file, source.text, env);
    if (parsed.shapeless) {
      // Said in one line that quotes nothing of it: it may be a host file reached through a link.
      builder.report({ file: source.file, line: 1, column: 1, path: '', message: SHAPELESS }, 0, 'parse');
      builder.incomplete = true;
      continue;
    }
    warnings.push(...parsed.warnings);
    for (const d of parsed.diagnostics) {
      const { doc, ...rest } = d;
      builder.report(rest, doc, 'parse');
    }
    for (const sd of parsed.documents) {
      if (!sd.usable) {
        builder.incomplete = true;
        continue;
      }
      if (sd.value === null || sd.value === undefined) continue; // empty document (comments only, a lone ---)
      parsedDocs.push(sd);
    }
  }
  if (tell) {
    tell([...parsedDocs.map((d) => d.value), ...foreign.map((d) => d.value)]);
    yield;
  }
  const documents: PlacedDocument[] = [];
  for (const sd of parsedDocs) {
    const doc = placed(sd);
    for (const issue of validateAgainstSchema(sd.value)) {
      const d = { ...fields(doc.at(issue.segments, issue.atKey)), message: issue.message };
      if (builder.isFlagged(sd.file, sd.index, d.path, ['parse'])) continue; // e.g. an unset ${env:...} left it empty
      builder.report(d, sd.index, 'schema');
    }
    documents.push(doc);
    yield;
  }
  for (const [i, fd] of foreign.entries()) {
    const doc: PlacedDocument = {
      file: fd.file,
      index: i,
      value: fd.value,
      at: (segs, atKey = false) => PlaceOnUse.root(fd.file, fd, segs, atKey),
    };
    for (const issue of validateAgainstSchema(fd.value))
      builder.report({ ...fields(doc.at(issue.segments, issue.atKey)), message: issue.message }, i, 'schema');
    documents.push(doc);
    yield;
  }
  for (const sd of documents) yield* builder.addDocument(sd);
  const state = builder.finish();
  if (env instanceof PolicedEnv && env.read.size) state.envReferences = [...env.read].sort();
  warnings.push(...builder.warnings);
  const diagnostics = builder.sortedDiagnostics();
  if (diagnostics.length > 0) throw new ConfigError(diagnostics);
  return state;
}

/**
 * building() for files all in the fast YAML subset, without the parsed tree of their clients and
 * endpoints ever whole in memory: each file's skeleton is read (its environments' clients and
 * endpoints deferred), checked and built, then each environment's clients and endpoints a chunk
 * at a time (buildDeferred), each chunk's tree let go before the next is read. For 100,000 clients
 * that tree was ~75 MB, promoted to and collected from V8's old generation. The model is the one
 * building() makes, its places found as building() finds them. Undefined when anything is not
 * clean (a file outside the subset, an interpolation that fails, any problem): building() then
 * loads the files again and reports as it always did.
 */
function* buildingFast(
  sources: readonly ConfigSource[],
  env: EnvSource,
  warnings: Diagnostic[],
  onParsed: ((documents: unknown[]) => void) | undefined,
): Generator<void, DesiredState | undefined, void> {
  try {
    return yield* buildFast(sources, env, warnings, onParsed);
  } catch (e) {
    if (e instanceof NotStreamable) return undefined;
    throw e;
  }
}

function* buildFast(
  sources: readonly ConfigSource[],
  env: EnvSource,
  warnings: Diagnostic[],
  onParsed: ((documents: unknown[]) => void) | undefined,
): Generator<void, DesiredState | undefined, void> {
  const builder = new Builder(sources.map((s) => s.file));
  const said: Diagnostic[] = [];
  const documents: PlacedDocument[] = [];
  const parts: StreamedPart[] = [];
  for (const source of sources) {
    const skeleton = parseFileSkeleton(source.file, source.text, env, true, takeLines(source));
    if (!skeleton) return undefined;
    said.push(...skeleton.parsed.warnings);
    const sd = skeleton.parsed.documents[0];
    if (!sd) continue;
    if (validateAgainstSchema(sd.value).length > 0) return undefined;
    const doc = placed(sd);
    documents.push(doc);
    const grouped = new Map<string, StreamedPart[]>();
    if (!groupDeferred(grouped, source, doc, skeleton.deferred)) return undefined;
    for (const inEnv of grouped.values()) for (const part of inEnv) parts.push({ ...part, lines: skeleton.lines });
  }
  onParsed?.(documents.map((d) => d.value));
  if (onParsed) yield;
  for (const doc of documents) yield* builder.addDocument(doc);
  if (builder.diagnostics.length > 0) return undefined;
  for (const part of parts) yield* buildDeferred(builder, part, env);
  const state = builder.finish();
  if (builder.diagnostics.length > 0) return undefined;
  if (env instanceof PolicedEnv && env.read.size) state.envReferences = [...env.read].sort();
  warnings.push(...said, ...builder.warnings);
  return state;
}
