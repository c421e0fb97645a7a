// `kms-sync init`: a commented starter file that references the schema and loads as is.
import { access, appendFile, mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { deriveOwner } from '../model/index.js';
import { modeline, schemaReferenceFor, writeSchemaCopy } from './modeline.js';

export interface InitOptions {
  /** Base of a relative targetFile (default: process.cwd()). */
  cwd?: string;
  /** Project slug (default: my-project). */
  project?: string;
  /** Project display name (default: derived from the slug). */
  name?: string;
  /** The `owner:` to declare (initConfig: derived from where the file goes, as a run would derive it, and written down so it never moves). */
  owner?: string;
}

export interface InitResult {
  /** Absolute path of the written file. */
  file: string;
  /** The `$schema` reference written in the modeline. */
  schema: string;
  /** The schema copy written beside the file, when the project has no kms-sync in node_modules. */
  schemaCopy?: { file: string; outcome: 'written' | 'updated' | 'unchanged' };
  /** The .gitignore beside the file, which now names core dumps. */
  gitignore: { file: string; outcome: 'written' | 'updated' | 'unchanged' };
}

/**
 * Lines that keep core dumps out of git: a killed kms-sync's memory can hold raw keys, and a core
 * file lands in the folder it ran in (core, or core.<pid>). `!core/` keeps folders named core.
 */
export const GITIGNORE_CORE_LINES = [
  "# Core dumps: a killed kms-sync's memory can hold raw keys (written by kms-sync init)",
  'core',
  'core.[0-9]*',
  '!core/',
];

/** Adds GITIGNORE_CORE_LINES to `dir`/.gitignore (made 0644 if missing) unless it names `core` already. */
export async function ignoreCoreDumps(dir: string): Promise<InitResult['gitignore']> {
  const file = path.join(dir, '.gitignore');
  const block = `${GITIGNORE_CORE_LINES.join('\n')}\n`;
  let text: string | undefined;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (text === undefined) {
    await writeFile(file, block, { encoding: 'utf8', flag: 'wx', mode: 0o644 });
    return { file, outcome: 'written' };
  }
  if (text.split(/\r?\n/).some((l) => l.trim() === 'core' || l.trim() === '/core'))
    return { file, outcome: 'unchanged' };
  await appendFile(file, `${text === '' || text.endsWith('\n') ? '' : '\n'}${block}`, 'utf8');
  return { file, outcome: 'updated' };
}

export class FileExistsError extends Error {
  readonly file: string;

  constructor(file: string) {
    super(`${file} already exists: refusing to overwrite it (choose another file name or remove it first)`);
    this.name = 'FileExistsError';
    this.file = file;
  }
}

const SLUG = /^[a-z0-9]([a-z0-9-]{0,48}[a-z0-9])?$/;

/** The starter file's text. */
export function renderStarterConfig(opts: { schema: string; project?: string; name?: string; owner?: string }): string {
  const slug = opts.project ?? 'my-project';
  if (!SLUG.test(slug)) {
    throw new Error(
      `invalid project slug ${JSON.stringify(slug)}: use 1-50 lower-case letters, digits or hyphens, ` +
        'starting and ending with a letter or digit',
    );
  }
  const name =
    opts.name ??
    slug
      .split('-')
      .map((w) => w.charAt(0).toUpperCase() + w.slice(1))
      .join(' ');
  const urlVar = `${slug.toUpperCase().replaceAll('-', '_')}_URL`;
  return `${modeline(opts.schema)}
#
# kms-sync desired state (format kms-sync/v1). Preview and apply with:
#   kms-sync plan  -f ${'<this file or its folder>'}
#   kms-sync apply -f ${'<this file or its folder>'}
# Several files and folders can be combined: a project is defined (with "name") in one file and
# referenced (slug + environments) in others, e.g. one file per team.
# Strings may use \${env:NAME} or \${env:NAME:-default}; write $\${env:NAME} for a literal.
apiVersion: kms-sync/v1

# Which configuration owns what it creates: it changes and deletes only resources marked with this
# id, so another configuration can share the environments. Declared here so that it never moves.
owner: ${JSON.stringify(opts.owner ?? `${slug}-config`)}

# Optional secret stores for the raw client keys (shown once, at creation). Keys that do not
# name a store go to the default store.
# stores:
#   - name: team-vault
#     uri: vault://vault.example:8200/secret/kms
#     default: true

projects:
  - slug: ${slug}                      # identity; environments are <slug>-<type>
    name: ${JSON.stringify(name)}
    description: Managed by kms-sync
    environments:
      - type: production              # environment slug: ${slug}-production
        url: \${env:${urlVar}:-https://api.example.com}
        protected: true               # never deleted or replaced by kms-sync
        templates:                    # plans, referenced by name from clients
          - name: standard
            rateLimitDay: 10000
            maxClients: 100
        clients:
          - name: example-client
            type: company
            template: standard
            ipWhitelist: [10.0.0.0/8]  # addresses or CIDR ranges
            metadata:
              owner: platform-team
            keys:
              - name: primary
                ttl: 90d              # or expiresAt: 2027-01-01T00:00:00Z (not both)
                autoRotate: true
                # secret: { store: team-vault, name: ${slug}/example-client }
        endpoints:
          - method: GET
            path: /v1/status
            name: Service status
`;
}

/** The starter text for `targetFile` and the schema reference it uses (nothing is written). */
export function starterFor(targetFile: string, opts: InitOptions = {}) {
  const cwd = path.resolve(opts.cwd ?? process.cwd());
  const file = path.resolve(cwd, targetFile);
  const reference = schemaReferenceFor(file);
  const starterOpts: { schema: string; project?: string; name?: string; owner?: string } = { schema: reference.ref };
  if (opts.owner !== undefined) starterOpts.owner = opts.owner;
  if (opts.project !== undefined) starterOpts.project = opts.project;
  if (opts.name !== undefined) starterOpts.name = opts.name;
  return { file, reference, content: renderStarterConfig(starterOpts) };
}

/**
 * Writes the starter file (never over an existing one) and, when the project has no kms-sync in
 * its node_modules, the schema copy its `$schema` line points at.
 */
export async function initConfig(targetFile: string, opts: InitOptions = {}): Promise<InitResult> {
  const target = path.resolve(path.resolve(opts.cwd ?? process.cwd()), targetFile);
  // Refused before anything is written: no schema copy without the file that needs it.
  if (
    await access(target).then(
      () => true,
      () => false,
    )
  )
    throw new FileExistsError(targetFile);
  // Configuration is meant to be committed: readable, never writable by others whatever the umask.
  await mkdir(path.dirname(target), { recursive: true, mode: 0o755 });
  const owner = opts.owner ?? (await deriveOwner(path.dirname(target)));
  const { file, reference, content } = starterFor(targetFile, { ...opts, owner });
  const outcome = await writeSchemaCopy(reference);
  try {
    await writeFile(file, content, { encoding: 'utf8', flag: 'wx', mode: 0o644 });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') throw new FileExistsError(targetFile);
    throw err;
  }
  const gitignore = await ignoreCoreDumps(path.dirname(file));
  return {
    file,
    schema: reference.ref,
    gitignore,
    ...(reference.copyTo && outcome !== 'none' ? { schemaCopy: { file: reference.copyTo, outcome } } : {}),
  };
}
