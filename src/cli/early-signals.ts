// The first module the executable loads: a signal that comes while the CLI is still loading
// (nothing has started, no lock is held) exits with the shell's code for it, quietly, instead of
// the runtime's death by signal. interrupts.ts replaces these listeners once the CLI is loaded.
const early = Object.assign((signal: NodeJS.Signals) => process.exit(signal === 'SIGTERM' ? 143 : 130), {
  kmsSyncEarly: true,
});
process.on('SIGINT', early);
process.on('SIGTERM', early);
