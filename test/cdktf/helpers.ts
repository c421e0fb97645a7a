// Scratch CDKTF projects for the tests: a folder that resolves `kms-sync/cdktf`, `kms-sync/cdktn`,
// `cdktf`, `cdktn` and `constructs` the way a user's project does (through node_modules), against
// this repository's build.
import { existsSync, mkdirSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { repoRoot, workspace, writeFiles } from '../support/cli.js';

export type Flavour = 'cdktf' | 'cdktn';

export function assertBuilt(): void {
  if (!existsSync(path.join(repoRoot, 'dist', 'cdktf', 'flavours', 'cdktf', 'index.js'))) {
    throw new Error('dist/ has no CDKTF bindings: run `npm run build` first (npm test does)');
  }
}

/** A user-style project folder with node_modules links and the given files. */
export function cdktfProject(files: Record<string, string> = {}): string {
  assertBuilt();
  const dir = workspace();
  const nm = path.join(dir, 'node_modules');
  mkdirSync(nm);
  symlinkSync(repoRoot, path.join(nm, 'kms-sync'), 'dir');
  mkdirSync(path.join(nm, '@types'));
  for (const pkg of ['cdktf', 'cdktn', 'constructs', '@types/node'])
    symlinkSync(path.join(repoRoot, 'node_modules', pkg), path.join(nm, pkg), 'dir');
  writeFiles(dir, { 'package.json': JSON.stringify({ type: 'module', private: true }) + '\n', ...files });
  return dir;
}

/** cdktf.json whose app runs a TypeScript entry with Node's type stripping. */
export function cdktfJson(entry = 'main.ts'): string {
  return (
    JSON.stringify(
      {
        language: 'typescript',
        app: `node ${entry}`,
        projectId: 'test',
        sendCrashReports: 'false',
        terraformProviders: [],
        terraformModules: [],
        context: {},
      },
      null,
      2,
    ) + '\n'
  );
}
