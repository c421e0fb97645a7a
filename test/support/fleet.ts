// Random fleets for the engine's tests (test/engine/): seeded into the emulator, with a
// configuration that half matches them, and every output of a plan as the commands write them.
import { expect } from 'vitest';
import { classifyDrift } from '../../src/plan/drift.js';
import { noIgnoreRules } from '../../src/plan/ignore.js';
import type { Plan } from '../../src/plan/types.js';
import { renderPlanJson, renderPlanMarkdown, renderPlanText } from '../../src/report/index.js';

const OWNER = 'fleet-test';

/** mulberry32: the same fleet for the same seed. */
function rng(seed: number) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return { next, int: (n: number) => Math.floor(next() * n), chance: (p: number) => next() < p };
}

const pad = (n: number, w: number) => String(n).padStart(w, '0');

/** Seeds a random fleet under `prefix` and returns the YAML of a configuration that half matches it. */
export function randomFleet(seed: number, prefix: string, seedEnv: (req: Record<string, unknown>) => void): string {
  const r = rng(seed);
  const slugs = [`${prefix}a`, `${prefix}a-b`, `${prefix}ab`, `${prefix}z`].filter(() => r.chance(0.8));
  if (slugs.length === 0) slugs.push(`${prefix}a`);
  const lines = ['apiVersion: kms-sync/v1', `owner: ${OWNER}`, 'projects:'];
  for (const slug of slugs) {
    const live = r.chance(0.85);
    const types = ['prod', 'staging', 'dev', 'zeta'].filter(() => r.chance(0.6));
    if (types.length === 0) types.push('prod');
    lines.push(`  - slug: ${slug}`, `    name: ${live && r.chance(0.2) ? 'Renamed' : slug}`);
    if (r.chance(0.2)) lines.push('    description: differs from the live one');
    lines.push('    environments:');
    for (const type of types) {
      const seeded = live && r.chance(0.85);
      const templates = 1 + r.int(3);
      const clients = r.int(25);
      const keys = r.int(3);
      const endpoints = r.int(4);
      if (seeded) {
        const owned = r.chance(0.8);
        seedEnv({
          project: slug,
          type,
          url: 'https://api.example.test',
          templates,
          clients,
          keysPerClient: keys,
          endpoints,
          metadata: owned ? { 'kms-sync/owner': OWNER } : { team: 'x' },
        });
        // Twice now and then: every client twice (duplicates the plan leaves alone).
        if (r.chance(0.1))
          seedEnv({
            project: slug,
            type,
            templates,
            clients: 2,
            keysPerClient: keys,
            endpoints: 0,
            metadata: { 'kms-sync/owner': OWNER },
          });
      }
      if (seeded && r.chance(0.15)) continue; // seeded but left the configuration
      lines.push(`      - type: ${type}`, '        url: https://api.example.test', '        templates:');
      for (let i = 0; i < templates; i++)
        lines.push(`          - { name: tpl-${pad(i, 3)}, rateLimitDay: ${r.chance(0.1) ? 5 : 1000 + i} }`);
      const wanted = Array.from({ length: clients }, (_, i) => i).filter(() => r.chance(0.8));
      const extra = r.int(3);
      if (wanted.length + extra > 0) lines.push('        clients:');
      for (const i of wanted) {
        lines.push(
          `          - name: client-${pad(i, 5)}`,
          '            type: company',
          `            template: tpl-${pad(i % templates, 3)}`,
          '            ipWhitelist: [10.0.0.0/8]',
        );
        lines.push(`            metadata: { index: "${r.chance(0.1) ? 'changed' : i}" }`);
        const k = keys + (r.chance(0.1) ? 1 : 0);
        if (k > 0)
          lines.push(`            keys: [${Array.from({ length: k }, (_, j) => `{ name: key-${j} }`).join(', ')}]`);
      }
      for (let j = 0; j < extra; j++) lines.push(`          - { name: new-${j}, template: tpl-000 }`);
      const eps = Array.from({ length: endpoints }, (_, i) => i).filter(() => r.chance(0.7));
      if (eps.length) lines.push('        endpoints:');
      for (const i of eps)
        lines.push(`          - { method: GET, path: /r/${pad(i, 4)}, name: "route ${r.chance(0.1) ? 'x' : i}" }`);
    }
  }
  return `${lines.join('\n')}\n`;
}

/** Every output of a plan, as the commands write them. */
export function outputs(plan: Plan): Record<string, string> {
  return {
    text: renderPlanText(plan, { color: false }),
    json: renderPlanJson(plan),
    markdown: renderPlanMarkdown(plan, { drift: classifyDrift(plan, noIgnoreRules()) }),
    saved: JSON.stringify(plan, null, 1),
  };
}

/** Equal outputs, compared as strings (a deep compare of large strings is slow); a difference is shown as a diff. */
export function expectSame(got: Record<string, string>, want: Record<string, string>, what: string) {
  expect(Object.keys(got)).toEqual(Object.keys(want));
  for (const k of Object.keys(want)) if (got[k] !== want[k]) expect(got[k], `${what}: ${k}`).toBe(want[k]);
}
