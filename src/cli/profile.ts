// KMS_SYNC_PROFILE=FILE: at exit, the process writes where its time went (for the benchmark, which
// runs kms-sync as a user does, as a fresh process): the phases between the performance marks the
// commands set (`kms:<phase>-start` / `kms:<phase>-end`), start-up, CPU and peak RSS. Never on
// unless asked; never contains configuration values or keys.
import { writeFileSync } from 'node:fs';

export function recordProfileOnExit(file: string | undefined): void {
  if (!file) return;
  performance.mark('kms:main');
  process.on('exit', (code) => {
    const marks = new Map(performance.getEntriesByType('mark').map((m) => [m.name, m.startTime]));
    const phases: Record<string, number> = {};
    // Start-up: from the process start to main (Node's bootstrap and the first imports).
    phases.startupMs = marks.get('kms:main') ?? 0;
    phases.commandImportMs = (marks.get('kms:command-loaded') ?? 0) - (marks.get('kms:main') ?? 0);
    for (const [name, start] of marks) {
      const m = /^kms:(.+)-start$/.exec(name);
      const end = m ? marks.get(`kms:${m[1]}-end`) : undefined;
      if (m && end !== undefined) phases[`${m[1]}Ms`] = (phases[`${m[1]}Ms`] ?? 0) + end - start;
    }
    const cpu = process.cpuUsage();
    writeFileSync(
      file,
      JSON.stringify({
        exitCode: code,
        totalMs: performance.now(),
        phases,
        cpuMs: (cpu.user + cpu.system) / 1000,
        maxRssKB: process.resourceUsage().maxRSS,
      }),
    );
  });
}
