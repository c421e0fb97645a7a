// Projects a configuration references without defining (`external: true`, or a `kms_project` data
// source in a CDKTF stack): kms-sync never creates, renames or deletes them, and reads only the
// environments the configuration names (live/read.ts: none of their others "left"). What it can
// not do is create an environment in a project that does not exist: said before anything is
// planned, instead of a failed write halfway through an apply.
import type { DesiredState, LiveState } from '../model/index.js';

/** One line per external project that is missing from the service while an environment of it is to be created. */
export function missingExternalProjects(
  desired: Pick<DesiredState, 'externalProjects' | 'envs'>,
  live: Pick<LiveState, 'projects' | 'envs'>,
): string[] {
  const liveProjects = new Set(live.projects.map((p) => p.slug));
  const liveEnvs = new Set(live.envs.map((e) => e.projectEnv));
  const problems: string[] = [];
  for (const p of desired.externalProjects ?? []) {
    if (liveProjects.has(p.slug)) continue;
    const toCreate = desired.envs
      .filter((e) => e.project === p.slug && !liveEnvs.has(e.projectEnv))
      .map((e) => e.projectEnv);
    if (toCreate.length === 0) continue;
    const where = p.source ? ` (${p.source.file}:${p.source.line}${p.source.path ? ` ${p.source.path}` : ''})` : '';
    problems.push(
      `project "${p.slug}" is external${where}: defined elsewhere, so kms-sync does not create it, and it does not exist in the service; ` +
        `environment(s) ${toCreate.join(', ')} cannot be created in it. Create the project first (in its own configuration or the dashboard), ` +
        'or define it here (give it a name and remove "external: true")',
    );
  }
  return problems;
}
