// kms-sync command line: thin wiring of the layers (DESIGN.md "Layers"), loaded by main.ts once the
// Node.js version is checked and the compile cache is on. Only the module of the command being
// run is imported (src/cli/commands.ts), so start-up stays fast.
import { CommanderError } from 'commander';
import { buildProgram } from './commands.js';
import { EXIT } from './exit-codes.js';
import { ExitWith } from './errors.js';
import { describeFsError } from './fs-errors.js';
import { applyHabits } from './habits.js';
import { interruptCause, interruptExitCode, installInterrupts, onInterruptStop } from './interrupts.js';
import { cutLongValues } from '../model/printable.js';
import { redactCredentials } from '../model/redact.js';
import { err } from './output.js';
import { recordProfileOnExit } from './profile.js';
import { installFrontEnd } from '../engine/front-end.js';
import { clearReadProgress, withReadProgress } from './read-progress.js';

async function main(argv: string[]) {
  // Before anything can be interrupted or write: Ctrl-C while planning, and a closed output, are handled.
  installInterrupts();
  // The engine's notes, progress line and stop, on this terminal (engine/front-end.ts).
  installFrontEnd({
    notice: err,
    withProgress: (api, read, signal) => withReadProgress(api, read, process.env, signal),
    clearProgress: clearReadProgress,
    onStop: onInterruptStop,
  });
  recordProfileOnExit(process.env.KMS_SYNC_PROFILE);
  try {
    const program = await buildProgram(argv.slice(2));
    const habits = applyHabits(argv.slice(2), program);
    if (habits.error) throw Object.assign(new Error(habits.error), { exitCode: EXIT.error });
    performance.mark('kms:command-loaded');
    await program.parseAsync([...argv.slice(0, 2), ...habits.args]);
  } catch (error) {
    if (error instanceof CommanderError) {
      process.exitCode = error.exitCode === 0 ? 0 : EXIT.error;
      return;
    }
    // After an interrupt, the requests it cut fail: the interrupt was said when it came, and its
    // exit code says the rest (an apply that wrote something ends with ExitWith(3) instead).
    if (interruptCause() && !(error instanceof ExitWith)) {
      process.exitCode = interruptExitCode();
      return;
    }
    const code = (error as { exitCode?: number }).exitCode ?? EXIT.error;
    // An OS error names a syscall and maybe a temp file: say what it means for the user's path.
    const message = describeFsError(error) ?? (error as Error).message;
    // Redacted before cutting, so a cut never leaves part of a credential; long values cut (printable.ts).
    if (message) err(`Error: ${cutLongValues(redactCredentials(message))}\n`);
    process.exitCode = code;
  }
}

export const finished = main(process.argv);
