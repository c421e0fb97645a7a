// Start-up stays light: `kms-sync --version` / `--help` and the commands that do not need them never
// import the cloud SDKs, the HTTP stack, the emulator, the report publishers or the YAML/schema
// machinery. Checked on real processes by recording every module they resolve; a chunk of the
// bundled CLI (dist/bin/) stands for the modules it holds (dist/bin/modules.json, from the build).
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { describe, expect, it } from 'vitest';
import { buildFullProgram, buildProgram } from '../../src/cli/commands.js';
import { STORE_BACKENDS } from '../../src/secrets/registry.js';
import { cliPath, repoRoot, workspace } from '../support/cli.js';
import { scratchDir } from '../support/scratch.js';

const tracer = path.join(repoRoot, 'test', 'bench', 'fixtures', 'trace-imports.mjs');
const binDir = path.join(repoRoot, 'dist', 'bin');
const chunkModules = JSON.parse(readFileSync(path.join(binDir, 'modules.json'), 'utf8')) as Record<string, string[]>;

/** The URLs a process resolved, with each chunk of the bundle replaced by the files of the modules it holds. */
function unbundled(urls: string[]): string[] {
  return urls.flatMap((url) => {
    if (!url.startsWith('file:')) return [url];
    const file = fileURLToPath(url);
    if (path.dirname(file) !== binDir) return [url];
    const held = chunkModules[path.basename(file)];
    if (!held) throw new Error(`${file} is not in dist/bin/modules.json: rebuild (npm run build)`);
    return held.map((m) => pathToFileURL(path.join(repoRoot, m)).href);
  });
}

function importsOf(
  args: string[],
  cwd = repoRoot,
): Promise<{ code: number; stdout: string; modules: string[]; resolved: string[] }> {
  const file = path.join(scratchDir('kms-sync-imports-'), 'modules.txt');
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', tracer, cliPath, ...args],
      {
        cwd,
        env: { PATH: process.env.PATH, HOME: process.env.HOME, KMS_SYNC_TRACE_IMPORTS: file },
      },
      (error, stdout) => {
        const resolved = readFileSync(file, 'utf8').split('\n');
        resolve({
          code: error ? Number((error as { code?: unknown }).code ?? 1) : 0,
          stdout,
          modules: unbundled(resolved),
          resolved,
        });
      },
    );
  });
}

const HEAVY = [
  /node_modules\/@aws-sdk\//,
  /node_modules\/@google-cloud\//,
  /node_modules\/@azure\//,
  /node_modules\/@kubernetes\//,
  /node_modules\/undici\//,
  /node_modules\/libsodium/,
  /node_modules\/age-encryption\//,
  /dist\/emulator\//,
  /dist\/report\/publish\//,
  /dist\/secrets\/backends\//,
  // The agent's modules (its metrics pull prom-client, its server node:http, whose ESM facade loads
  // Node's own undici): ~90 ms of every command while a shared module of the commands imported them.
  /dist\/agent\//,
  /node_modules\/prom-client\//,
  /^node:https?$/,
];
const heavyIn = (modules: string[]) => modules.filter((m) => HEAVY.some((re) => re.test(m)));

describe('start-up', () => {
  it.each([['--version'], ['--help'], ['help']])(
    'kms-sync %s loads no command module and nothing heavy',
    async (arg) => {
      const r = await importsOf([arg]);
      expect(r.code).toBe(0);
      expect(heavyIn(r.modules)).toEqual([]);
      expect(
        r.modules.filter((m) =>
          /dist\/cli\/(sync-commands|drift-command|secrets-command|emulator-command|demo-command)\.js$/.test(m),
        ),
      ).toEqual([]);
      expect(r.modules.filter((m) => /node_modules\/(yaml|ajv)\//.test(m))).toEqual([]);
    },
  );

  it('validate with the default store loads no cloud SDK, no age, no emulator, no publisher, no yaml package (fast path), no schema compiler', async () => {
    const dir = workspace({
      'kms.yaml':
        'apiVersion: kms-sync/v1\nprojects:\n  - slug: acme\n    name: Acme\n    environments:\n      - type: production\n        url: https://api.acme.example\n        templates: [{ name: gold, rateLimitDay: 10 }]\n        clients: [{ name: globex, template: gold, keys: [{ name: primary }] }]\n',
    });
    const r = await importsOf(['validate', '-f', 'kms.yaml'], dir);
    expect(r.code, r.stdout).toBe(0);
    expect(r.stdout).toContain('Configuration valid');
    expect(heavyIn(r.modules)).toEqual([]);
    expect(r.modules.filter((m) => /node_modules\/yaml\//.test(m))).toEqual([]);
    // The schema was compiled by the build (dist/config/schema-validator.generated.cjs): no ajv compiler at run time.
    expect(r.modules.filter((m) => /dist\/config\/schema-validator\.generated\.cjs$/.test(m))).toHaveLength(1);
    expect(r.modules.filter((m) => /node_modules\/ajv\/dist\/(ajv|core|compile\/)/.test(m))).toEqual([]);
    // Our code came from the bundle's chunks alone: the one file of dist/ outside it is that validator.
    const ours = r.resolved.filter((u) => u.startsWith(pathToFileURL(path.join(repoRoot, 'dist')).href));
    expect(
      ours
        .filter((u) => !u.startsWith(pathToFileURL(binDir).href))
        .map((u) => path.relative(repoRoot, fileURLToPath(u))),
    ).toEqual(['dist/config/schema-validator.generated.cjs']);
  });

  it('every chunk of the bundled CLI is plain ASCII and carries no doc comments (a start reads it on the fast path)', () => {
    const chunks = Object.keys(chunkModules).filter((f) => f.endsWith('.js'));
    expect(chunks.length).toBeGreaterThan(10);
    for (const chunk of chunks) {
      const text = readFileSync(path.join(binDir, chunk), 'latin1');
      expect(/[^\x00-\x7f]/.exec(text)?.index, `${chunk}: a byte beyond ASCII`).toBeUndefined();
      expect(/^\s*\/\*\*/m.exec(text)?.[0], `${chunk}: a doc comment`).toBeUndefined();
    }
  });

  it('the placeholder commands of the top-level help match the registered commands exactly', async () => {
    const full = await buildFullProgram();
    const light = await buildProgram(['--help']);
    expect(light.helpInformation()).toBe(full.helpInformation());
    expect(light.commands.map((c) => c.name()).sort()).toEqual(full.commands.map((c) => c.name()).sort());
  });

  it('the lazy store table names the schemes and URI forms of each backend module', async () => {
    for (const b of STORE_BACKENDS) {
      const loaded = await b.load();
      expect(b.schemes).toEqual(loaded.schemes);
      expect(b.forms).toEqual(loaded.forms);
    }
  });
});
