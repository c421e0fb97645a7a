#!/usr/bin/env node
// kms-sync command line: thin wiring of the layers (DESIGN.md "Layers").
import { Command, CommanderError } from 'commander';
import { registerEmulator } from './emulator-command.js';
import { EXIT } from './exit-codes.js';

export function buildProgram(): Command {
  const program = new Command();
  program
    .name('kms-sync')
    .description('Manage API access as code: plan and apply projects, environments, templates, clients, keys and endpoints.')
    .version('0.1.0')
    .showHelpAfterError()
    .exitOverride();
  registerEmulator(program);
  return program;
}

async function main(argv: string[]) {
  const program = buildProgram();
  try {
    await program.parseAsync(argv);
  } catch (err) {
    if (err instanceof CommanderError) {
      process.exitCode = err.exitCode === 0 ? 0 : EXIT.error;
      return;
    }
    process.stderr.write(`Error: ${(err as Error).message}\n`);
    process.exitCode = (err as { exitCode?: number }).exitCode ?? EXIT.error;
  }
}

await main(process.argv);
