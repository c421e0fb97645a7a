// `npm run crash`: the long crash campaign, on demand. Options: --seed N, --iterations N.
// Prints one line per iteration and the figures the closing note reports; exits 1 on any failure.
import { runCampaign } from './campaign.js';
import { formatFigures, KILL_WINDOWS } from './lib.js';

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const seed = arg('seed', Math.floor(Math.random() * 2 ** 31));
const iterations = arg('iterations', 100);
const started = Date.now();
const report = await runCampaign({ seed, iterations, log: (l) => process.stdout.write(`${l}\n`) });
process.stdout.write(`\nseed ${report.seed}, ${report.iterations} iterations in ${Math.round((Date.now() - started) / 1000)} s\n`);
process.stdout.write(`disturbances: ${Object.entries(report.byDisturbance).map(([w, n]) => `${w} ${n}`).join(', ')}\n`);
process.stdout.write(`SIGKILLs: ${report.kills} by window: ${KILL_WINDOWS.map((w) => `${w} ${report.killsByWindow[w]}`).join(', ')}; aimed kills in their window: ${report.aimedHits}/${report.aimedKills}\n`);
process.stdout.write(`keys issued (distinct live ids observed): ${report.keysIssued}; keys lost: ${report.keysLost}; strays: ${report.strays}\n`);
process.stdout.write(`${formatFigures(report)}\n`);
if (report.failures.length) {
  process.stdout.write(`FAILURES (${report.failures.length}):\n${report.failures.map((f) => `  - ${f}`).join('\n')}\n`);
  process.exitCode = 1;
} else process.stdout.write('no key lost, no stray live, journal empty, no raw key printed, every final plan empty\n');
