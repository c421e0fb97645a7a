// The `--data` file: the emulator's state across restarts. Read whole and checked (shape, then the
// cross-references the service relies on) before the emulator starts, so it never serves a
// half-read state; written atomically (temp file, fsync, rename, fsync of the folder).
import { randomBytes } from 'node:crypto';
import { closeSync, fsyncSync, openSync, readFileSync, renameSync, statSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';
import { ServerKeyPair } from './encryption.js';
import { ApiError } from './errors.js';
import { KmsService } from './service.js';
import { checkDepth, checkObject, type FieldRule } from './validate.js';

export const DATA_FILE_VERSION = 1;

/** The file cannot be used; its message names the file and what is wrong with it. */
export class DataFileError extends Error {}

const req = (rule: FieldRule): FieldRule => ({ ...rule, required: true });
const str = req({ type: 'string' });
const int = req({ type: 'integer', min: 0 });
const open = req({ type: 'object', open: true });
const list = (fields: Record<string, FieldRule>) => req({ type: 'array', items: { fields } });
const stats = req({ type: 'object', fields: { total: int, success: int, error: int } });

const keyFields = {
  id: str,
  name: str,
  expiresAt: req({ type: 'string', nullable: true }),
  autoRotate: req({ type: 'boolean' }),
  hash: req({ type: 'string', pattern: /^[0-9a-f]{64}$/, patternHint: 'a SHA-256 in hex' }),
  keyPrefix: str,
  createdAt: str,
};
const templateFields = { id: str, name: str, rateLimitDay: int, maxClients: int, createdAt: str, updatedAt: str };
const clientFields = {
  id: str,
  name: str,
  type: str,
  templateId: req({ type: 'string', nullable: true }),
  ipWhitelist: req({ type: 'array', items: { type: 'string' } }),
  metadata: open,
  keys: list(keyFields),
  createdAt: str,
  updatedAt: str,
  stats,
  usage: req({ type: 'object', fields: { day: str, count: int } }),
};
const endpointFields = {
  method: str,
  path: str,
  name: str,
  description: str,
  request: open,
  response: open,
  metadata: open,
  stats,
  createdAt: str,
  updatedAt: str,
};
const logFields = {
  id: str,
  clientId: str,
  status: req({ type: 'string', pattern: /^(success|error)$/, patternHint: 'success or error' }),
  durationMs: int,
  timestamp: str,
  method_path: str,
  name: str,
  reason: { type: 'string' } as FieldRule,
};
const envFields = {
  id: str,
  project: str,
  projectEnv: str,
  type: str,
  url: str,
  createdAt: str,
  templates: list(templateFields),
  clients: list(clientFields),
  endpoints: list(endpointFields),
  logs: list(logFields),
};
const projectFields = {
  slug: str,
  name: str,
  description: str,
  status: str,
  createdAt: str,
  updatedAt: str,
  envs: list(envFields),
};
const fileFields = {
  version: req({ type: 'integer', min: DATA_FILE_VERSION, max: DATA_FILE_VERSION }),
  serverKey: str,
  state: req({ type: 'object', fields: { projects: list(projectFields) } }),
};

interface SavedState {
  serverKey: string;
  state: {
    projects: {
      slug: string;
      envs: {
        id: string;
        project: string;
        projectEnv: string;
        type: string;
        templates: { id: string }[];
        clients: { id: string; templateId: string | null }[];
        endpoints: { method: string; path: string }[];
      }[];
    }[];
  };
}

function lineColumn(text: string, position: number): string {
  const before = text.slice(0, position);
  const line = before.split('\n').length;
  return `line ${line}, column ${position - before.lastIndexOf('\n')}`;
}

/** What the service relies on beyond the shape: unique identities and references that resolve. */
function checkReferences(saved: SavedState): string | undefined {
  const slugs = new Set<string>();
  const envSlugs = new Set<string>();
  const envIds = new Set<string>();
  const clientIds = new Set<string>();
  for (const [i, p] of saved.state.projects.entries()) {
    const at = `state.projects[${i}]`;
    if (slugs.has(p.slug)) return `${at}.slug: project '${p.slug}' appears twice`;
    slugs.add(p.slug);
    for (const [j, e] of p.envs.entries()) {
      const eat = `${at}.envs[${j}]`;
      if (e.project !== p.slug) return `${eat}.project: is '${e.project}' inside project '${p.slug}'`;
      if (e.projectEnv !== `${p.slug}-${e.type}`)
        return `${eat}.projectEnv: '${e.projectEnv}' is not '${p.slug}-${e.type}'`;
      if (envSlugs.has(e.projectEnv)) return `${eat}.projectEnv: environment '${e.projectEnv}' appears twice`;
      if (envIds.has(e.id)) return `${eat}.id: environment id '${e.id}' appears twice`;
      envSlugs.add(e.projectEnv);
      envIds.add(e.id);
      const templateIds = new Set<string>();
      for (const [k, t] of e.templates.entries()) {
        if (templateIds.has(t.id)) return `${eat}.templates[${k}].id: template id '${t.id}' appears twice`;
        templateIds.add(t.id);
      }
      for (const [k, c] of e.clients.entries()) {
        if (clientIds.has(c.id)) return `${eat}.clients[${k}].id: client id '${c.id}' appears twice`;
        clientIds.add(c.id);
        if (c.templateId !== null && !templateIds.has(c.templateId))
          return `${eat}.clients[${k}].templateId: template '${c.templateId}' is not in ${e.projectEnv}`;
      }
      const routes = new Set<string>();
      for (const [k, r] of e.endpoints.entries()) {
        const mp = `${r.method}:${r.path}`;
        if (routes.has(mp)) return `${eat}.endpoints[${k}]: endpoint '${mp}' appears twice`;
        routes.add(mp);
      }
    }
  }
  return undefined;
}

/**
 * Reads a `--data` file; undefined when it does not exist yet (the emulator starts empty and
 * creates it). Anything else that is not a complete, consistent state is a DataFileError.
 */
export function loadDataFile(file: string): { service: KmsService; keys: ServerKeyPair } | undefined {
  const fail = (what: string) =>
    new DataFileError(
      `--data file ${file}: ${what}. The emulator did not start: fix the file, or move it away to start empty.`,
    );
  let bytes: Buffer;
  try {
    if (statSync(file).isDirectory()) throw fail('is a directory, not a file');
    bytes = readFileSync(file);
  } catch (e) {
    if (e instanceof DataFileError) throw e;
    const code = (e as NodeJS.ErrnoException).code;
    if (code === 'ENOENT') return undefined;
    throw fail(`cannot be read (${code === 'EACCES' ? 'permission denied' : (code ?? (e as Error).message)})`);
  }
  if (bytes.length === 0) throw fail('is empty (a truncated write?)');
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw fail('is not UTF-8 text');
  }
  let saved: unknown;
  try {
    saved = JSON.parse(text);
  } catch (e) {
    const message = (e as Error).message;
    const at = /at position (\d+)/.exec(message);
    // An error at the very end of the text: the file stops mid-value.
    if (/end of JSON input/i.test(message) || (at && Number(at[1]) >= text.trimEnd().length - 1))
      throw fail(`ends before its JSON is complete (${bytes.length} bytes; a truncated file?)`);
    throw fail(`is not valid JSON${at ? ` at ${lineColumn(text, Number(at[1]))}` : ''}`);
  }
  try {
    checkObject(saved, fileFields, '$');
    checkDepth(saved, '$', 64);
  } catch (e) {
    if (e instanceof ApiError) throw fail(`is not an emulator state: ${e.message}`);
    throw e;
  }
  const problem = checkReferences(saved as SavedState);
  if (problem) throw fail(`is not a consistent emulator state: $.${problem}`);
  let keys: ServerKeyPair;
  try {
    keys = ServerKeyPair.fromPkcs8((saved as SavedState).serverKey);
    if (keys.privateKey.asymmetricKeyType !== 'x25519') throw new Error('not x25519');
  } catch {
    throw fail('$.serverKey: is not an X25519 private key (PKCS#8 DER, base64)');
  }
  return { service: KmsService.fromJSON((saved as SavedState).state), keys };
}

/** Writes the state atomically: a crash leaves the old file or the new one, never half of one. */
export function saveDataFile(file: string, service: KmsService, keys: ServerKeyPair): void {
  writeAtomic(file, JSON.stringify({ version: DATA_FILE_VERSION, serverKey: keys.toPkcs8(), state: service.toJSON() }));
}

function writeAtomic(file: string, text: string) {
  // A random name opened exclusively: never a file another user pre-created in a shared folder.
  const tmp = `${file}.${process.pid}-${randomBytes(6).toString('hex')}.tmp`;
  const fd = openSync(tmp, 'wx', 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, file);
  const dfd = openSync(dirname(file), 'r');
  try {
    fsyncSync(dfd);
  } finally {
    closeSync(dfd);
  }
}
