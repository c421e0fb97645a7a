import { mkdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { ConfigError, formatDiagnostic, loadDesiredState } from '../../src/config/index.js';
import type { DesiredState } from '../../src/model/index.js';
import { scratchDir } from '../support/scratch.js';

/** Writes `files` (relative path → text) into a fresh temporary folder; returns the folder. */
export async function writeTree(files: Record<string, string>): Promise<string> {
  const dir = scratchDir('kms-sync-config-');
  for (const [rel, text] of Object.entries(files)) {
    const full = path.join(dir, rel);
    await mkdir(path.dirname(full), { recursive: true });
    await writeFile(full, text);
  }
  return dir;
}

/** Loads the tree and returns the formatted diagnostics (`file:line:column: path: message`). */
export async function errorsOf(
  files: Record<string, string>,
  opts: { args?: string[]; env?: Record<string, string | undefined> } = {},
): Promise<string[]> {
  const dir = await writeTree(files);
  try {
    await loadDesiredState(opts.args ?? ['.'], { cwd: dir, env: opts.env ?? {} });
  } catch (err) {
    if (err instanceof ConfigError) return err.diagnostics.map(formatDiagnostic);
    throw err;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  throw new Error('expected a ConfigError, but the configuration loaded');
}

export async function stateOf(
  files: Record<string, string>,
  opts: { args?: string[]; env?: Record<string, string | undefined> } = {},
): Promise<{ state: DesiredState; files: string[]; dir: string }> {
  const dir = await writeTree(files);
  const result = await loadDesiredState(opts.args ?? ['.'], { cwd: dir, env: opts.env ?? {} });
  return { ...result, dir };
}

/**
 * The state as data: locations are placed when read (config/load.ts), so they are compared as the
 * fields a reader gets, through their JSON form.
 */
export function asData<T>(value: T): T {
  return JSON.parse(JSON.stringify(value)) as T;
}

/** Drops `source` fields, for comparisons that ignore where things were declared. */
export function withoutSources(state: DesiredState): unknown {
  return JSON.parse(JSON.stringify(state, (k, v: unknown) => (k === 'source' ? undefined : v)));
}

/** A valid project file: acme with production (gold, bronze) and staging (sandbox). */
export const PROJECT = `apiVersion: kms-sync/v1
projects:
  - slug: acme
    name: Acme
    environments:
      - type: production
        url: https://api.acme.example
        templates:
          - { name: gold, rateLimitDay: 100, maxClients: 5 }
          - { name: bronze, rateLimitDay: 10 }
      - type: staging
        url: https://staging.acme.example
        templates:
          - { name: sandbox, rateLimitDay: 10 }
`;

/** Header of a team file that references acme/production; append client or endpoint lines. */
export const TEAM_HEAD = `apiVersion: kms-sync/v1
projects:
  - slug: acme
    environments:
      - type: production
`;
