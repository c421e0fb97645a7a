// kms-sync command line: thin wiring of the layers (DESIGN.md "Layers"), loaded by main.ts once the
// Node.js version is checked and the compile cache is on. Only the module of the command being
// run is imported (src/cli/commands.ts), so start-up stays fast.
import { CommanderError } from 'commander';
import { buildProgram } from './commands.js';
import { EXIT } from './exit-codes.js';
import { describeFsError } from './fs-errors.js';
import { applyHabits } from './habits.js';
import { cutLongValues } from '../model/printable.js';
import { redactCredentials } from '../model/redact.js';
import { redact } from './output.js';
import { recordProfileOnExit } from './profile.js';

async function main(argv: string[]) {
  recordProfileOnExit(process.env.KMS_SYNC_PROFILE);
  try {
    const program = await buildProgram(argv.slice(2));
    const habits = applyHabits(argv.slice(2), program);
    if (habits.error) throw Object.assign(new Error(habits.error), { exitCode: EXIT.error });
    performance.mark('kms:command-loaded');
    await program.parseAsync([...argv.slice(0, 2), ...habits.args]);
  } catch (err) {
    if (err instanceof CommanderError) {
      process.exitCode = err.exitCode === 0 ? 0 : EXIT.error;
      return;
    }
    const code = (err as { exitCode?: number }).exitCode ?? EXIT.error;
    // An OS error names a syscall and maybe a temp file: say what it means for the user's path.
    const message = describeFsError(err) ?? (err as Error).message;
    // Redacted before cutting, so a cut never leaves part of a credential; long values cut (printable.ts).
    if (message) process.stderr.write(redact(`Error: ${cutLongValues(redactCredentials(message))}\n`));
    process.exitCode = code;
  }
}

export const finished = main(process.argv);
