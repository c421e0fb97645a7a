// The `# yaml-language-server: $schema=...` modeline that gives editors completion and checks.
import path from 'node:path';
import { schemaFilePath } from './schema.js';

/** Public identifier of the schema (its `$id`). */
export const SCHEMA_ID = 'https://kms-sync.dev/schemas/kms-sync.schema.json';

/** Relative reference from a config file to the installed package's schema (forward slashes). */
export function schemaRefFor(configFile: string, cwd: string = process.cwd()): string {
  const from = path.dirname(path.resolve(cwd, configFile));
  let rel = path.relative(from, schemaFilePath()).split(path.sep).join('/');
  if (!rel.startsWith('.') && !path.isAbsolute(rel)) rel = `./${rel}`;
  return rel;
}

export function modeline(schemaRef: string): string {
  return `# yaml-language-server: $schema=${schemaRef}`;
}
