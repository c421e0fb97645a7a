#!/usr/bin/env node
// kms-sync command line: thin wiring of the layers (DESIGN.md "Layers").
import './node-version.js'; // first: refuses an old Node.js before anything needing Node 22 loads
import { Command, CommanderError } from 'commander';
import { registerDemo } from './demo-command.js';
import { registerDrift } from './drift-command.js';
import { registerEmulator } from './emulator-command.js';
import { registerSecrets } from './secrets-command.js';
import { registerSyncCommands } from './sync-commands.js';
import { EXIT } from './exit-codes.js';
import { applyHabits } from './habits.js';
import { finishHelp } from './help.js';
import { out, redact } from './output.js';

export function buildProgram(): Command {
  const program = new Command();
  program
    .name('kms-sync')
    .description('Manage API access as code: plan and apply projects, environments, templates, clients, keys and endpoints.')
    .version('0.1.0')
    .option('--no-color', 'no colours in the output, anywhere on the line (also NO_COLOR=1)')
    .showHelpAfterError()
    .exitOverride();
  program.command('version').description('print the version of kms-sync').action(() => { out('kms-sync 0.1.0\n'); });
  registerSyncCommands(program);
  registerDrift(program);
  registerSecrets(program);
  registerEmulator(program);
  registerDemo(program);
  program.command('provider').description('Serve the Terraform/OpenTofu provider (plugin protocol 6): Terraform starts this itself')
    .action(async () => process.exit(await (await import('../provider/main.js')).runProvider()));
  program.command('completion').description('print a shell completion script (bash, zsh or fish)').argument('<shell>', 'bash, zsh or fish')
    .action(async (shell: string) => { out((await import('./completion.js')).completionScript(shell, program)); });
  finishHelp(program);
  return program;
}

async function main(argv: string[]) {
  const program = buildProgram();
  try {
    const habits = applyHabits(argv.slice(2));
    if (habits.error) throw Object.assign(new Error(`${habits.error}\nRun kms-sync --help for the commands and options.`), { exitCode: EXIT.error });
    await program.parseAsync([...argv.slice(0, 2), ...habits.args]);
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
