// `kms-sync emulator`: the local service for demos, CI and offline work.
import { readFileSync } from 'node:fs';
import { type Command, InvalidArgumentError, Option } from 'commander';
import { startEmulator } from '../emulator/index.js';

// The key comes from the environment or a file, never the command line: an argument is visible to
// every local user in `ps` (issues 26, 35). --api-key is refused with a message saying what to use.
function keysFromEnv(): string[] {
  const list = process.env.KMS_EMULATOR_API_KEYS ?? process.env.KMS_EMULATOR_API_KEY ?? process.env.KMS_API_KEY ?? '';
  return list
    .split(',')
    .map((k) => k.trim())
    .filter(Boolean);
}

/** Keys from a file: one per line (or comma-separated); blank lines and # comments are skipped. */
function keysFromFile(file: string): string[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new Error(`--api-key-file ${file}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`);
  }
  return text
    .split('\n')
    .filter((l) => !l.trim().startsWith('#'))
    .flatMap((l) => l.split(','))
    .map((k) => k.trim())
    .filter(Boolean);
}

const fraction = (v: string) => {
  const n = Number(v);
  if (!(v.trim() !== '' && n >= 0 && n <= 1))
    throw new InvalidArgumentError(`expected a fraction between 0 and 1, got ${v}`);
  return n;
};
const integer = (v: string) => {
  if (!/^\d{1,9}$/.test(v)) throw new InvalidArgumentError(`expected a non-negative integer, got ${v}`);
  return Number(v);
};
const port = (v: string) => {
  if (!/^\d{1,5}$/.test(v) || Number(v) > 65535)
    throw new InvalidArgumentError(`a port is an integer from 0 to 65535 (0 picks a free one), got ${v}`);
  return Number(v);
};

export function registerEmulator(program: Command) {
  program
    .command('emulator')
    .description('run a local emulator of the key-management service (real HTTP on 127.0.0.1)')
    .option('--port <n>', 'port to listen on (0 picks a free one)', port, 8080)
    .option('--host <addr>', 'address to bind', '127.0.0.1')
    .option(
      '--api-key-file <file>',
      'read the accepted project key(s) from this file, one per line (default: $KMS_EMULATOR_API_KEYS, comma-separated, $KMS_EMULATOR_API_KEY or $KMS_API_KEY)',
    )
    .addOption(new Option('--api-key <key...>', 'no longer accepted: the key would show in ps').hideHelp())
    .option('--data <file>', 'keep state in this JSON file across restarts (atomic writes)')
    .option('--latency-ms <n>', 'added latency per API request', integer, 0)
    .option('--error-rate <f>', 'fraction of API requests answered 503', fraction, 0)
    .option('--rate-429 <f>', 'fraction of API requests answered 429 with Retry-After', fraction, 0)
    .option('--retry-after <s>', 'Retry-After seconds on injected 429s', integer, 1)
    .option('--drop-rate <f>', 'fraction of writes that commit, then drop the connection unanswered', fraction, 0)
    .option('--control', 'serve the /__emulator control routes (counts, faults, seed; they need a project key)', false)
    .action(async (o) => {
      if (o.apiKey) {
        throw new Error(
          '--api-key is no longer accepted: every local user sees a command line in ps. Put the key in KMS_EMULATOR_API_KEY (KMS_EMULATOR_API_KEYS for several, comma-separated) or in a file for --api-key-file FILE (one per line)',
        );
      }
      const apiKeys: string[] = o.apiKeyFile ? keysFromFile(o.apiKeyFile) : [];
      if (apiKeys.length === 0) apiKeys.push(...keysFromEnv());
      if (apiKeys.length === 0) {
        throw new Error(
          'no project key: set KMS_EMULATOR_API_KEY, or pass --api-key-file FILE (the emulator never invents and prints one)',
        );
      }
      const emu = await startEmulator({
        port: o.port,
        host: o.host,
        apiKeys,
        dataFile: o.data,
        latencyMs: o.latencyMs,
        errorRate: o.errorRate,
        rate429: o.rate429,
        retryAfterSeconds: o.retryAfter,
        dropRate: o.dropRate,
        control: o.control,
      });
      process.stdout.write(
        `kms-sync emulator listening on ${emu.url} (${apiKeys.length} project key(s)${o.data ? `, data in ${o.data}` : ', in memory'})\n`,
      );
      process.stdout.write(`OpenAPI contract: ${emu.url}/openapi.yaml\n`);
      if (o.control)
        process.stdout.write(`Control routes: ${emu.url.replace(/\/api\/v1$/, '')}/__emulator/{counts,faults,seed}\n`);
      const stop = () => {
        void emu.close().then(() => process.exit(0));
      };
      process.once('SIGINT', stop);
      process.once('SIGTERM', stop);
    });
}
