// Benchmarks of the Terraform provider (issue 13), separate from bench/run.js:
//  1. start to handshake: spawn dist/provider/bin.js as Terraform does (cookie, client
//     certificate) and time until the handshake line, against a bare `node` start;
//  2. refresh at list speed: `terraform plan` over N imported clients, requests counted by the
//     emulator, next to what one GET per resource costs (the same N GETs, timed, at Terraform's
//     parallelism of 10).
// Usage: npm run build && node bench/provider.js [--clients 1000] [--starts 20]
// Writes bench/provider-results.json. Needs terraform (or tofu) on PATH for part 2.
import { execFile, execFileSync, spawn } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { KmsClient } from '../dist/api/client.js';
import { startEmulator } from '../dist/emulator/index.js';
import { makeServerCertificate } from '../dist/provider/plugin/certificate.js';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const bin = path.join(root, 'dist', 'provider-bin', 'terraform-provider-kms.js');
const arg = (name, dflt) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const CLIENTS = arg('clients', 1000);
const STARTS = arg('starts', 20);
const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];
const round = (x) => Math.round(x * 10) / 10;

function timeToLine(cmd, args, env) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(cmd, args, { env, stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    child.stdout.on('data', (b) => {
      out += b;
      if (out.includes('\n')) {
        const ms = performance.now() - t0;
        child.kill('SIGKILL');
        resolve(ms);
      }
    });
    child.on('exit', () => (out.includes('\n') ? undefined : reject(new Error('no line'))));
  });
}

async function startup() {
  const cert = makeServerCertificate().certPem;
  const env = {
    PATH: process.env.PATH,
    TF_PLUGIN_MAGIC_COOKIE: 'd602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2',
    PLUGIN_PROTOCOL_VERSIONS: '5,6',
    PLUGIN_CLIENT_CERT: cert,
  };
  const provider = [];
  const bare = [];
  for (let i = 0; i < STARTS; i++) {
    provider.push(await timeToLine(process.execPath, [bin], env));
    bare.push(await timeToLine(process.execPath, ['-e', 'console.log(1)'], env));
  }
  return {
    starts: STARTS,
    providerMs: { median: round(pct(provider, 50)), p90: round(pct(provider, 90)) },
    bareNodeMs: { median: round(pct(bare, 50)), p90: round(pct(bare, 90)) },
  };
}

function which(name) {
  try {
    return execFileSync('sh', ['-c', `command -v ${name}`], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined;
  }
}

/** Runs terraform; with /usr/bin/time, also the CPU seconds of terraform and the provider processes it waited for. */
const tf = (terraform, cwd, env, ...args) =>
  new Promise((resolve, reject) => {
    const t0 = performance.now();
    const timeFile = path.join(cwd, '.cpu');
    const [cmd, argv] = existsSync('/usr/bin/time')
      ? ['/usr/bin/time', ['-f', '%U %S', '-o', timeFile, terraform, ...args]]
      : [terraform, args];
    execFile(cmd, argv, { cwd, env, maxBuffer: 256 * 1024 * 1024 }, (e, stdout, stderr) => {
      if (e) return reject(new Error(`terraform ${args[0]} failed:\n${stdout}\n${stderr}`));
      const cpu = existsSync(timeFile) ? readFileSync(timeFile, 'utf8').trim().split(/\s+/).map(Number) : undefined;
      resolve({
        ms: performance.now() - t0,
        stdout,
        ...(cpu ? { cpuS: Math.round((cpu[0] + cpu[1]) * 10) / 10 } : {}),
      });
    });
  });

async function refresh(terraform) {
  const apiKey = 'sk_test_bench0123456789';
  const emu = await startEmulator({ port: 0, apiKeys: [apiKey] });
  try {
    emu.service.seed({ project: 'bench', type: 'production', clients: CLIENTS, templates: 1 });
    const dir = mkdtempSync(path.join(tmpdir(), 'kms-provider-bench-'));
    const mirror = path.join(dir, 'mirror', 'registry.terraform.io', 'kms-sync', 'kms', '0.1.0', 'linux_amd64');
    mkdirSync(mirror, { recursive: true });
    writeFileSync(
      path.join(mirror, 'terraform-provider-kms_v0.1.0'),
      `#!/bin/sh\nexec "${process.execPath}" "${bin}" "$@"\n`,
    );
    chmodSync(path.join(mirror, 'terraform-provider-kms_v0.1.0'), 0o755);
    writeFileSync(
      path.join(dir, 'tf.rc'),
      `provider_installation {\n  filesystem_mirror {\n    path = "${path.join(dir, 'mirror')}"\n  }\n}\n`,
    );
    const work = path.join(dir, 'work');
    mkdirSync(work);
    const config = (withImports) => `terraform {
  required_providers {
    kms = { source = "kms-sync/kms", version = "0.1.0" }
  }
}
provider "kms" {}
locals {
  names = toset([for i in range(${CLIENTS}) : format("client-%05d", i)])
}
${
  withImports
    ? `import {
  for_each = local.names
  to       = kms_client.c[each.key]
  id       = "bench-production/\${each.key}"
}`
    : ''
}
resource "kms_client" "c" {
  for_each     = local.names
  project_env  = "bench-production"
  name         = each.key
  template     = "tpl-000"
  ip_whitelist = ["10.0.0.0/8"]
  metadata     = { index = tostring(tonumber(substr(each.key, 7, 5))) }
}
`;
    writeFileSync(path.join(work, 'main.tf'), config(true));
    const env = {
      ...(process.env.PROVIDER_NODE_OPTIONS ? { NODE_OPTIONS: process.env.PROVIDER_NODE_OPTIONS } : {}),
      PATH: process.env.PATH,
      HOME: dir,
      TF_CLI_CONFIG_FILE: path.join(dir, 'tf.rc'),
      TF_IN_AUTOMATION: '1',
      CHECKPOINT_DISABLE: '1',
      KMS_API_URL: emu.url,
      KMS_API_KEY: apiKey,
    };
    await tf(terraform, work, env, 'init', '-input=false', '-no-color');
    const imported = await tf(terraform, work, env, 'apply', '-input=false', '-no-color', '-auto-approve');
    // The clients are managed now: plan them as any configuration does, without the import blocks.
    writeFileSync(path.join(work, 'main.tf'), config(false));
    emu.resetCounts();
    const plan = await tf(terraform, work, env, 'plan', '-input=false', '-no-color', '-detailed-exitcode');
    const counts = emu.counts();
    const total = Object.values(counts).reduce((a, b) => a + b, 0);

    // What one GET per resource would cost: the same clients, one request each, 10 in flight.
    const api = new KmsClient({ baseUrl: emu.url, apiKey, parallelism: 10, readParallelism: 10 });
    const ids = (await api.listClients('bench-production')).map((c) => c.id);
    emu.resetCounts();
    const t0 = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: 10 }, async () => {
        while (next < ids.length) await api.getClient(ids[next++], 'bench-production');
      }),
    );
    const perGetMs = performance.now() - t0;
    const perGetRequests = Object.values(emu.counts()).reduce((a, b) => a + b, 0);
    const t1 = performance.now();
    await api.listClients('bench-production');
    const listMs = performance.now() - t1;
    await api.close();
    return {
      clients: CLIENTS,
      importApplyMs: Math.round(imported.ms),
      planMs: Math.round(plan.ms),
      planCpuS: plan.cpuS,
      planRequests: { total, byRoute: counts },
      perResourceGet: { requests: perGetRequests, ms: Math.round(perGetMs) },
      oneListing: { requests: Math.ceil(CLIENTS / 100), ms: Math.round(listMs) },
    };
  } finally {
    await emu.close();
  }
}

const result = { date: new Date().toISOString(), node: process.version, startup: await startup() };
console.log('start to handshake', result.startup);
const terraform = which('terraform') ?? which('tofu');
if (terraform) {
  result.refresh = await refresh(terraform);
  console.log('refresh', JSON.stringify(result.refresh, null, 2));
} else {
  console.log('refresh: skipped, neither terraform nor tofu is on PATH');
}
writeFileSync(path.join(root, 'bench', 'provider-results.json'), `${JSON.stringify(result, null, 2)}\n`);
