// The packaged provider (a Node.js single executable application, scripts/package-provider.js)
// against the Node.js launcher `kms-sync provider install` writes otherwise: the executable's size
// and its start to handshake (Terraform starts the provider several times per command), median
// of N starts each. Usage: npm run build && node bench/provider-packaged.js [--release DIR] [--starts 10]
// (without --release it builds linux_amd64 into a temporary folder first). Prints the figures and
// writes bench/provider-packaged-results.json; docs/terraform-provider.md quotes them.
import { execFileSync, spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { makeServerCertificate } from '../dist/provider/plugin/certificate.js';
import { executableName, releaseZipName, zipEntryData } from '../dist/provider/release.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const { values: args } = parseArgs({
  options: { release: { type: 'string' }, starts: { type: 'string', default: '10' } },
});
const STARTS = Number(args.starts);
const version = JSON.parse(readFileSync(path.join(root, 'package.json'), 'utf8')).version;
const work = mkdtempSync(path.join(tmpdir(), 'kms-sync-bench-packaged-'));
const median = (xs) => Math.round([...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]);

function timeToHandshake(cmd, env) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(cmd, [], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (b) => {
      out += b;
      if (out.includes('\n')) {
        const ms = performance.now() - t0;
        child.kill('SIGKILL');
        if (!out.startsWith('1|6|tcp|')) reject(new Error(`not a handshake: ${out}`));
        resolve(ms);
      }
    });
    child.on('exit', () => (out.includes('\n') ? undefined : reject(new Error('exited before the handshake'))));
  });
}

try {
  const release = args.release ?? path.join(work, 'release');
  if (!args.release)
    execFileSync(
      process.execPath,
      [path.join(root, 'scripts', 'package-provider.js'), '--out', release, '--platforms', 'linux_amd64'],
      { stdio: 'inherit' },
    );
  const zip = path.join(release, releaseZipName(version, 'linux_amd64'));
  const exe = path.join(work, executableName(version, 'linux_amd64'));
  writeFileSync(exe, zipEntryData(readFileSync(zip), executableName(version, 'linux_amd64')));
  chmodSync(exe, 0o755);
  const launcher = path.join(work, 'launcher');
  writeFileSync(
    launcher,
    `#!/bin/sh\nexec '${process.execPath}' '${path.join(root, 'dist', 'provider-bin', 'terraform-provider-kms.js')}' "$@"\n`,
  );
  chmodSync(launcher, 0o755);
  const env = {
    PATH: '/usr/bin:/bin',
    TF_PLUGIN_MAGIC_COOKIE: 'd602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2',
    PLUGIN_PROTOCOL_VERSIONS: '5,6',
    PLUGIN_CLIENT_CERT: makeServerCertificate().certPem,
  };
  const packaged = [];
  const node = [];
  await timeToHandshake(exe, env); // the first start reads the file from disk
  for (let i = 0; i < STARTS; i++) {
    packaged.push(await timeToHandshake(exe, env));
    node.push(await timeToHandshake(launcher, env));
  }
  const result = {
    date: new Date().toISOString(),
    node: process.version,
    starts: STARTS,
    executableMB: Math.round(statSync(exe).size / 1e5) / 10,
    zipMB: Math.round(statSync(zip).size / 1e5) / 10,
    handshakeMs: { packaged: median(packaged), nodeLauncher: median(node) },
  };
  console.log(JSON.stringify(result, null, 2));
  writeFileSync(path.join(root, 'bench', 'provider-packaged-results.json'), `${JSON.stringify(result, null, 2)}\n`);
} finally {
  rmSync(work, { recursive: true, force: true });
}
