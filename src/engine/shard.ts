// `--shard K/N`: one of N jobs runs the part of a fleet a stable hash gives it (issue 37), for a
// GitHub Actions matrix, a GitLab `parallel: matrix` or a Kubernetes Indexed Job
// (JOB_COMPLETION_INDEX). A project the configuration defines goes whole to one shard with all
// its environments (`project:SLUG`): its create (and its environments' creates and deletes) are
// never split across shards, and an environment never moves to another shard, whose checkout would
// not hold the secrets of its keys. The environments of a project the configuration only references
// (`external: true`: never created or deleted by it) are hashed one by one (`env:PROJECT_ENV`).
// The choice needs no request. `kms-sync report merge` joins the shards' plans into the plan of the
// whole (plan/merge.ts).
import { hash } from 'node:crypto';
import type { DesiredState } from '../model/index.js';
import type { LoadedConfig, PlanOptions } from './run.js';
import { UsageError } from './errors.js';

export interface Shard {
  /** 0-based. */
  index: number;
  count: number;
}

/** `K/N` (1 ≤ K ≤ N), or `N` alone with K from JOB_COMPLETION_INDEX (0-based, Kubernetes Indexed Jobs). */
export function parseShard(spec: string, env: NodeJS.ProcessEnv = process.env): Shard {
  const full = /^\s*(\d+)\s*\/\s*(\d+)\s*$/.exec(spec);
  const countOnly = /^\s*(\d+)\s*$/.exec(spec);
  let index: number;
  let count: number;
  if (full) {
    index = Number(full[1]) - 1;
    count = Number(full[2]);
  } else if (countOnly) {
    count = Number(countOnly[1]);
    const raw = env.JOB_COMPLETION_INDEX;
    if (raw === undefined || !/^\d+$/.test(raw.trim())) {
      throw new UsageError(
        `--shard ${spec}: with the shard count alone, the shard comes from JOB_COMPLETION_INDEX (a Kubernetes Indexed Job), which is ${raw === undefined ? 'not set' : `not an index (${JSON.stringify(raw)})`}; give it as --shard K/N (K from 1 to N)`,
      );
    }
    index = Number(raw.trim());
  } else
    throw new UsageError(
      `--shard ${JSON.stringify(spec)}: expected K/N, the K-th of N shards (e.g. --shard 2/4), or N with JOB_COMPLETION_INDEX set`,
    );
  if (!Number.isSafeInteger(count) || count < 1 || count > 10_000)
    throw new UsageError(`--shard ${spec}: the shard count must be from 1 to 10000`);
  if (index < 0 || index >= count)
    throw new UsageError(
      `--shard ${spec}: shard ${index + 1} of ${count} does not exist (shards are numbered 1 to ${count}${full ? '' : '; JOB_COMPLETION_INDEX counts from 0'})`,
    );
  return { index, count };
}

/** The shard a key falls in: the first 6 bytes of its sha256, modulo the count (stable across runs and machines). */
export function shardOf(key: string, count: number): number {
  return hash('sha256', key, 'buffer').readUIntBE(0, 6) % count;
}

export interface ShardScope {
  /** The configuration narrowed to the shard's environments and projects. */
  desired: DesiredState;
  /** Whether an environment (`project_env` of `project`) is the shard's: for environments read because they left the configuration. */
  hasEnv(projectEnv: string, project: string): boolean;
  /** Whether a project's own operations (create, rename) and warnings are the shard's. */
  ownsProject(slug: string): boolean;
}

/** The part of a configuration a shard runs. */
export function shardScope(desired: DesiredState, shard: Shard): ShardScope {
  const defined = new Set(desired.projects.map((p) => p.slug));
  const ownsProject = (slug: string) => shardOf(`project:${slug}`, shard.count) === shard.index;
  const hasEnv = (pe: string, project: string) =>
    defined.has(project) ? ownsProject(project) : shardOf(`env:${pe}`, shard.count) === shard.index;
  const envs = desired.envs.filter((e) => hasEnv(e.projectEnv, e.project));
  const mine = new Set(envs.map((e) => e.projectEnv));
  const projects = new Set([...envs.map((e) => e.project), ...desired.projects.map((p) => p.slug).filter(ownsProject)]);
  return {
    desired: {
      ...desired,
      projects: desired.projects.filter((p) => projects.has(p.slug)),
      ...(desired.externalProjects
        ? { externalProjects: desired.externalProjects.filter((p) => projects.has(p.slug)) }
        : {}),
      envs,
      templates: desired.templates.filter((t) => mine.has(t.projectEnv)),
      clients: desired.clients.filter((c) => mine.has(c.projectEnv)),
      endpoints: desired.endpoints.filter((e) => mine.has(e.projectEnv)),
    },
    hasEnv,
    ownsProject,
  };
}

/** A loaded configuration narrowed to `--shard SPEC`, and the shard for planFor; unchanged without a spec. */
export function shardConfig(
  cfg: LoadedConfig,
  spec: string | undefined,
  files: readonly string[],
): { cfg: LoadedConfig; shard?: NonNullable<PlanOptions['shard']> } {
  if (spec === undefined) return { cfg };
  const shard = parseShard(spec);
  const scope = shardScope(cfg.desired, shard);
  const { live: readAhead, ...rest } = cfg;
  readAhead?.stream.close(); // started for the whole configuration
  return {
    cfg: { ...rest, desired: scope.desired, leaving: (pe) => cfg.leaving(pe) && scope.hasEnv(pe, projectOfEnv(pe)) },
    shard: { index: shard.index, count: shard.count, files, ownsProject: scope.ownsProject },
  };
}

/** The project of an environment slug (`project_env`: the type is the last dash-separated part). */
const projectOfEnv = (pe: string) => pe.replace(/-[a-z][a-z0-9]*$/, '');
