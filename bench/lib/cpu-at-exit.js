// Loaded into each provider process of scenario 11 (NODE_OPTIONS=--import): appends the process's
// own CPU milliseconds to $KMS_BENCH_CPU_LOG when it exits, so that Terraform's own CPU is the
// command's total (its children included) minus its providers'.
import { appendFileSync } from 'node:fs';

process.on('exit', () => {
  const file = process.env.KMS_BENCH_CPU_LOG;
  if (!file) return;
  const { user, system } = process.cpuUsage();
  appendFileSync(file, `${(user + system) / 1000}\n`);
});
