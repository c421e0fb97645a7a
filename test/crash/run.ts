// `npm run crash`: the long crash campaign and every scenario, on demand. Options: --seed N,
// --iterations N (the apply/rotate campaign), --rounds N (two services, rotate --revoke-old),
// --tf-iterations N (terraform), --agent-iterations N (kms-sync agent),
// --only campaign,two-services,ci,terraform-ci,rotate,terraform,agent.
// Prints one line per iteration, then the figures per scenario and in total; exits 1 on any failure.
import { runAgentScenario } from './agent.js';
import { runCampaign } from './campaign.js';
import { runCiStore } from './ci-store.js';
import { formatFigures, KILL_WINDOWS, type Figures } from './lib.js';
import { runRotateRevoke } from './rotate-revoke.js';
import { runTerraform, runTerraformCi } from './terraform.js';
import { runTwoServices } from './two-services.js';

const arg = (name: string, dflt: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : dflt;
};
const onlyAt = process.argv.indexOf('--only');
const only = onlyAt > 0 ? new Set(process.argv[onlyAt + 1]!.split(',')) : undefined;
const seed = arg('seed', Math.floor(Math.random() * 2 ** 31));
const iterations = arg('iterations', 100);
const rounds = arg('rounds', 8);
const tfIterations = arg('tf-iterations', 25);
// With --only agent, --iterations sets the agent's iterations too.
const agentIterations = arg('agent-iterations', only?.has('agent') && only.size === 1 ? arg('iterations', 30) : 30);
const out = (l: string) => process.stdout.write(`${l}\n`);
const started = Date.now();
const results: { figures: Figures; seconds: number; skipped?: string }[] = [];

const scenario = async (name: string, go: () => Promise<Figures & { skipped?: string }>) => {
  if (only && !only.has(name)) return;
  out(`\n== ${name} ==`);
  const t = Date.now();
  const figures = await go();
  results.push({
    figures,
    seconds: Math.round((Date.now() - t) / 1000),
    ...(figures.skipped ? { skipped: figures.skipped } : {}),
  });
  if (figures.skipped) out(figures.skipped);
};

await scenario('campaign', async () => {
  const report = await runCampaign({ seed, iterations, log: out });
  out(
    `disturbances: ${Object.entries(report.byDisturbance)
      .map(([w, n]) => `${w} ${n}`)
      .join(', ')}; aimed kills in their window: ${report.aimedHits}/${report.aimedKills}`,
  );
  out(
    `SIGKILLs landed, per disturbance: ${Object.entries(report.landed)
      .map(
        ([d, w]) =>
          `${d}: ${Object.entries(w)
            .map(([x, n]) => `${x} ${n}`)
            .join(' ')}`,
      )
      .join('; ')}`,
  );
  out(
    `strays: ${report.strays}, of which ${report.keptByRotate} old generations kept by a rotate without --revoke-old (no overlap configured)`,
  );
  return report;
});
await scenario('two-services', () => runTwoServices({ seed, rounds, log: out }));
await scenario('ci', () => runCiStore({ seed, log: out }));
await scenario('terraform-ci', () => runTerraformCi({ seed, log: out }));
await scenario('rotate', () => runRotateRevoke({ seed, rounds, log: out }));
await scenario('terraform', async () => {
  const f = await runTerraform({ seed, iterations: tfIterations, log: out });
  if (!f.skipped)
    out(
      `terraform killed ${f.killedTerraform}, provider killed ${f.killedProvider}, -replace checks ${f.replaceChecks}, state files cut by a kill (put back) ${f.notes.filter((n) => n.includes('tfstate was cut')).length}; applies after a lost track: state rm ${f.stateLosses['state-rm']}, state cut to 0 bytes ${f.stateLosses.truncated}, .backup put back ${f.stateLosses.backup}; keys those applies issued ${f.issuedAfterLoss} (held keys are adopted)`,
    );
  return f;
});
await scenario('agent', async () => {
  const f = await runAgentScenario({ seed, iterations: agentIterations, log: out });
  out(f.notes.join('; '));
  return f;
});

out(`\n== figures (seed ${seed}, ${Math.round((Date.now() - started) / 1000)} s) ==`);
const total = {
  runs: 0,
  kills: 0,
  issued: 0,
  lost: 0,
  strays: 0,
  failures: 0,
  byWindow: Object.fromEntries(KILL_WINDOWS.map((w) => [w, 0])) as Record<string, number>,
};
for (const { figures: f, seconds, skipped } of results) {
  out(`${skipped ? `SKIPPED: ${f.scenario}` : formatFigures(f)} [${seconds} s]`);
  total.runs += f.runs;
  total.kills += f.kills;
  total.issued += f.keysIssued;
  total.lost += f.keysLost;
  total.strays += f.strays;
  total.failures += f.failures.length;
  for (const w of KILL_WINDOWS) total.byWindow[w]! += f.killsByWindow[w];
}
out(
  `total: ${total.runs} runs, ${total.kills} SIGKILLs [${KILL_WINDOWS.map((w) => `${w} ${total.byWindow[w]}`).join(', ')}]; keys issued ${total.issued}, lost ${total.lost}, strays ${total.strays}`,
);
const failing = results.filter((x) => x.figures.failures.length);
if (failing.length) {
  for (const { figures: f } of failing)
    out(`\nFAIL ${f.scenario} (${f.failures.length}):\n${f.failures.map((x) => `  - ${x}`).join('\n')}`);
  process.exitCode = 1;
} else out('no key lost, no stray live, journal empty, no raw key printed, every final plan empty');
