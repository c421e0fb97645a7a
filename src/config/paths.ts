// `-f` arguments → the sorted list of configuration files (YAML, and JSON) to load.
import { open, readdir, stat } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError, type Diagnostic } from './diagnostics.js';

const CONFIG_FILE = /\.(ya?ml|json)$/i;

/** Display form of a file: relative to `cwd`, with forward slashes. */
export function displayPath(file: string, cwd: string): string {
  const rel = path.relative(cwd, file);
  return (rel === '' ? path.basename(file) : rel).split(path.sep).join('/');
}

/**
 * A JSON file found in a folder is configuration when its beginning names a field of the format
 * (`apiVersion`, `projects`, `stores`) and it is none of kms-sync's own outputs (a saved plan, a
 * JSON plan or report, recognised by their first field): a package.json, tsconfig.json,
 * cdktf.json or saved plan beside the configuration is not read, nor a JSON Schema (the `kms-sync.schema.json` copy that
 * `init` writes names those fields too). A file named with -f is always read.
 */
async function isConfigJson(file: string): Promise<boolean> {
  const fh = await open(file, 'r').catch(() => undefined);
  if (!fh) return true; // let the loader report why it cannot be read
  try {
    const { bytesRead, buffer } = await fh.read(Buffer.alloc(4096), 0, 4096, 0);
    const head = buffer.subarray(0, bytesRead).toString('utf8');
    if (/"\$schema"\s*:\s*"https?:\/\/json-schema\.org\//.test(head)) return false;
    // kms-sync's own outputs name what they are: a saved plan (`kind`, first), a JSON plan or
    // drift report (`format_version`, first). Their `"projects":` inside `target` is no configuration.
    if (/^\s*\{\s*"(kind"\s*:\s*"kms-sync\/|format_version")/.test(head)) return false;
    return /"(apiVersion|projects|stores)"\s*:/.test(head);
  } finally {
    await fh.close();
  }
}

async function walk(dir: string, out: string[]): Promise<void> {
  const entries = await readdir(dir, { withFileTypes: true });
  for (const entry of entries) {
    if (entry.name.startsWith('.') || entry.name === 'node_modules') continue;
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      await walk(full, out);
    } else if (CONFIG_FILE.test(entry.name)) {
      const isFile = entry.isFile() || (entry.isSymbolicLink() && (await stat(full).catch(() => undefined))?.isFile());
      if (isFile && (!/\.json$/i.test(entry.name) || (await isConfigJson(full)))) out.push(full);
    }
  }
}

export interface FoundFile {
  path: string;
  /** Named directly with -f (rather than found in a folder). */
  named: boolean;
}

/** Like expandPaths, but reports problems into `diagnostics` instead of throwing. */
export async function collectFiles(paths: readonly string[], cwd: string, diagnostics: Diagnostic[]): Promise<FoundFile[]> {
  const files = new Map<string, boolean>();
  if (paths.length === 0) {
    diagnostics.push({ file: '<arguments>', line: 0, column: 0, path: '', message: 'no configuration files or folders given' });
  }
  for (const p of paths) {
    const full = path.resolve(cwd, p);
    const info = await stat(full).catch(() => undefined);
    if (!info) {
      diagnostics.push({ file: p, line: 0, column: 0, path: '', message: 'no such file or folder' });
    } else if (info.isDirectory()) {
      const found: string[] = [];
      await walk(full, found);
      if (found.length === 0) {
        diagnostics.push({ file: p, line: 0, column: 0, path: '', message: 'folder contains no *.yaml, *.yml or *.json files' });
      }
      for (const f of found) if (!files.has(f)) files.set(f, false);
    } else {
      files.set(full, true);
    }
  }
  // Code-unit order, independent of locale and of the order of the arguments.
  return [...files].map(([f, named]) => ({ path: f, named })).sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/**
 * Expands files and folders (all *.yaml / *.yml / *.json inside, recursively, hidden folders skipped) into
 * a de-duplicated, sorted list of absolute paths. Throws ConfigError for missing paths.
 */
export async function expandPaths(paths: readonly string[], opts: { cwd?: string } = {}): Promise<string[]> {
  const cwd = path.resolve(opts.cwd ?? process.cwd());
  const diagnostics: Diagnostic[] = [];
  const files = await collectFiles(paths, cwd, diagnostics);
  if (diagnostics.length > 0) throw new ConfigError(diagnostics);
  return files.map((f) => f.path);
}
