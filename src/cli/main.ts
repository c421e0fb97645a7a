#!/usr/bin/env node
// kms-sync command line: thin wiring of the layers (DESIGN.md "Layers"). Only the module of the
// command being run is imported (src/cli/commands.ts), so start-up stays fast.
import { CommanderError } from 'commander';
import { buildProgram } from './commands.js';
import { EXIT } from './exit-codes.js';
import { redact } from './output.js';
import { recordProfileOnExit } from './profile.js';

async function main(argv: string[]) {
  recordProfileOnExit(process.env.KMS_SYNC_PROFILE);
  try {
    const program = await buildProgram(argv.slice(2));
    performance.mark('kms:command-loaded');
    await program.parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      process.exitCode = err.exitCode === 0 ? 0 : EXIT.error;
      return;
    }
    const code = (err as { exitCode?: number }).exitCode ?? EXIT.error;
    const message = (err as Error).message;
    if (message) process.stderr.write(redact(`Error: ${message}\n`));
    process.exitCode = code;
  }
}

await main(process.argv);
