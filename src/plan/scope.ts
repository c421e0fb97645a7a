// `--env SLUG` (repeatable, globs): restricts every command to some environments, so one
// repository's runs can be split across CI jobs.
import type { DesiredState } from '../model/index.js';

export function globToRegExp(glob: string): RegExp {
  const body = glob
    .replace(/[.+^${}()|[\]\\]/g, '\\$&')
    .replace(/\*/g, '.*')
    .replace(/\?/g, '.');
  return new RegExp(`^${body}$`);
}

export function matchesAny(slug: string, patterns: readonly string[]): boolean {
  return patterns.length === 0 || patterns.some((p) => globToRegExp(p).test(slug));
}

/** The part of the desired state inside the selected environments. */
export function scopeDesired(state: DesiredState, patterns: readonly string[]): DesiredState {
  if (patterns.length === 0) return state;
  const envs = state.envs.filter((e) => matchesAny(e.projectEnv, patterns));
  const envSet = new Set(envs.map((e) => e.projectEnv));
  const projects = new Set(envs.map((e) => e.project));
  // Everything but the resources stays: the owner id above all (a scoped plan under a derived
  // owner would see its own resources as another configuration's).
  return {
    ...state,
    projects: state.projects.filter((p) => projects.has(p.slug)),
    ...(state.externalProjects ? { externalProjects: state.externalProjects.filter((p) => projects.has(p.slug)) } : {}),
    envs,
    templates: state.templates.filter((t) => envSet.has(t.projectEnv)),
    clients: state.clients.filter((c) => envSet.has(c.projectEnv)),
    endpoints: state.endpoints.filter((e) => envSet.has(e.projectEnv)),
  };
}

/** Patterns that select nothing are almost always typos: callers report them. */
export function unmatchedPatterns(state: DesiredState, patterns: readonly string[]): string[] {
  return patterns.filter((p) => !state.envs.some((e) => globToRegExp(p).test(e.projectEnv)));
}
