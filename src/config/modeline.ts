// The `# yaml-language-server: $schema=...` modeline that gives editors completion and checks.
// The reference must work from the user's project on every machine that checks it out, so it
// never points into this machine's global npm folder or npx cache: it points at the package in
// the project's own node_modules when kms-sync is a dependency there, else at a copy of the
// schema beside the configuration (`kms-sync.schema.json`, committed with it).
import { existsSync, readFileSync } from 'node:fs';
import { readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { schemaFilePath } from './schema.js';

/** Public identifier of the schema (its `$id`). */
export const SCHEMA_ID = 'https://kms-sync.dev/schemas/kms-sync.schema.json';

/** The file name of the copy written beside a configuration. */
export const SCHEMA_COPY_NAME = 'kms-sync.schema.json';

export interface SchemaReference {
  /** The `$schema` value, relative to the configuration's folder (forward slashes). */
  ref: string;
  /** Set when the reference is a copy beside the configuration that must be written there. */
  copyTo?: string;
}

const relative = (from: string, to: string) => {
  const rel = path.relative(from, to).split(path.sep).join('/');
  return rel.startsWith('.') ? rel : `./${rel}`;
};

/** The schema as the project of `dir` sees it: kms-sync in its node_modules, or kms-sync's own checkout. */
function projectSchema(dir: string): string | undefined {
  for (let at = path.resolve(dir); ; at = path.dirname(at)) {
    const installed = path.join(at, 'node_modules', 'kms-sync', 'schemas', SCHEMA_COPY_NAME);
    if (existsSync(installed)) return installed;
    // Inside kms-sync's own repository (its examples/): the schema of the checkout.
    const own = path.join(at, 'schemas', SCHEMA_COPY_NAME);
    if (existsSync(own) && existsSync(path.join(at, 'package.json'))) {
      try {
        if ((JSON.parse(readFileSync(path.join(at, 'package.json'), 'utf8')) as { name?: string }).name === 'kms-sync')
          return own;
      } catch {
        // not a package.json we can read: keep looking further up
      }
    }
    if (path.dirname(at) === at) return undefined;
  }
}

/** Where the `$schema` line of a configuration file should point (see the top of this file). */
export function schemaReferenceFor(configFile: string, cwd: string = process.cwd()): SchemaReference {
  const from = path.dirname(path.resolve(cwd, configFile));
  const installed = projectSchema(from);
  if (installed) return { ref: relative(from, installed) };
  return { ref: `./${SCHEMA_COPY_NAME}`, copyTo: path.join(from, SCHEMA_COPY_NAME) };
}

/** Relative `$schema` reference for a configuration file (see schemaReferenceFor). */
export function schemaRefFor(configFile: string, cwd: string = process.cwd()): string {
  return schemaReferenceFor(configFile, cwd).ref;
}

/**
 * Writes the schema copy a reference needs. An existing copy of kms-sync's schema is brought up to
 * date; any other file of that name is left alone and reported.
 */
export async function writeSchemaCopy(
  reference: SchemaReference,
): Promise<'written' | 'updated' | 'unchanged' | 'none'> {
  if (!reference.copyTo) return 'none';
  const schema = await readFile(schemaFilePath(), 'utf8');
  let existing: string | undefined;
  try {
    existing = await readFile(reference.copyTo, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== 'ENOENT') throw e;
  }
  if (existing === schema) return 'unchanged';
  if (existing !== undefined) {
    let id: unknown;
    try {
      id = (JSON.parse(existing) as { $id?: unknown }).$id;
    } catch {
      id = undefined;
    }
    if (id !== SCHEMA_ID) {
      throw new Error(
        `${reference.copyTo} exists and is not kms-sync's schema: refusing to overwrite it (move it, or point the $schema line elsewhere)`,
      );
    }
  }
  await writeFile(reference.copyTo, schema, { encoding: 'utf8', mode: 0o644 });
  return existing === undefined ? 'written' : 'updated';
}

export function modeline(schemaRef: string): string {
  return `# yaml-language-server: $schema=${schemaRef}`;
}
