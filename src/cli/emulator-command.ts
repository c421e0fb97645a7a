// `kms-sync emulator`: the local service for demos, CI and offline work.
import { readFileSync } from 'node:fs';
import { type Command, InvalidArgumentError } from 'commander';
import { startEmulator } from '../emulator/index.js';

// The key can come from the environment or a file as well as --api-key: a command-line argument
// is visible to every local user in `ps` (issue 26).
function keysFromEnv(): string[] {
  const list = process.env.KMS_EMULATOR_API_KEYS ?? process.env.KMS_EMULATOR_API_KEY ?? process.env.KMS_API_KEY ?? '';
  return list.split(',').map((k) => k.trim()).filter(Boolean);
}

/** Keys from a file: one per line (or comma-separated); blank lines and # comments are skipped. */
function keysFromFile(file: string): string[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new Error(`--api-key-file ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  return text.split('\n').filter((l) => !l.trim().startsWith('#')).flatMap((l) => l.split(',')).map((k) => k.trim()).filter(Boolean);
}

const fraction = (v: string) => {
  const n = Number(v);
  if (!(v.trim() !== '' && n >= 0 && n <= 1)) throw new InvalidArgumentError(`expected a fraction between 0 and 1, got ${v}`);
  return n;
};
const integer = (v: string) => {
  if (!/^\d{1,9}$/.test(v)) throw new InvalidArgumentError(`expected a non-negative integer, got ${v}`);
  return Number(v);
};
const port = (v: string) => {
  if (!/^\d{1,5}$/.test(v) || Number(v) > 65535) throw new InvalidArgumentError(`a port is an integer from 0 to 65535 (0 picks a free one), got ${v}`);
  return Number(v);
};

export function registerEmulator(program: Command) {
  program
    .command('emulator')
    .description('run a local emulator of the key-management service (real HTTP on 127.0.0.1)')
    .option('--port <n>', 'port to listen on (0 picks a free one)', port, 8080)
    .option('--host <addr>', 'address to bind', '127.0.0.1')
    .option('--api-key <key...>', 'accepted project key(s) (visible in ps: prefer --api-key-file or the environment); default: $KMS_EMULATOR_API_KEYS (comma-separated), $KMS_EMULATOR_API_KEY or $KMS_API_KEY')
    .option('--api-key-file <file>', 'read the accepted project key(s) from this file, one per line')
    .option('--data <file>', 'keep state in this JSON file across restarts (atomic writes)')
    .option('--latency-ms <n>', 'added latency per API request', integer, 0)
    .option('--error-rate <f>', 'fraction of API requests answered 503', fraction, 0)
    .option('--rate-429 <f>', 'fraction of API requests answered 429 with Retry-After', fraction, 0)
    .option('--retry-after <s>', 'Retry-After seconds on injected 429s', integer, 1)
    .option('--drop-rate <f>', 'fraction of writes that commit, then drop the connection unanswered', fraction, 0)
    .option('--control', 'serve the /__emulator control routes (counts, faults, seed; they need a project key)', false)
    .action(async (o) => {
      const apiKeys: string[] = [...(o.apiKey ?? []), ...(o.apiKeyFile ? keysFromFile(o.apiKeyFile) : [])];
      if (apiKeys.length === 0) apiKeys.push(...keysFromEnv());
      if (apiKeys.length === 0) {
        throw new Error('no project key: set KMS_EMULATOR_API_KEY, pass --api-key-file FILE or --api-key sk_test_… (the emulator never invents and prints one)');
      }
      const emu = await startEmulator({
        port: o.port, host: o.host, apiKeys, dataFile: o.data, latencyMs: o.latencyMs, errorRate: o.errorRate,
        rate429: o.rate429, retryAfterSeconds: o.retryAfter, dropRate: o.dropRate, control: o.control,
      });
      process.stdout.write(`kms-sync emulator listening on ${emu.url} (${apiKeys.length} project key(s)${o.data ? `, data in ${o.data}` : ', in memory'})\n`);
      process.stdout.write(`OpenAPI contract: ${emu.url}/openapi.yaml\n`);
      if (o.control) process.stdout.write(`Control routes: ${emu.url.replace(/\/api\/v1$/, '')}/__emulator/{counts,faults,seed}\n`);
      const stop = () => { void emu.close().then(() => process.exit(0)); };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
}
