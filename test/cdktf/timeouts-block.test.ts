// The generated resources (the built kms-sync/cdktf) make their `timeouts` block object on first use (scripts/generate-cdktf-bindings.ts,
// lazyTimeouts: one object less per resource at synth). The block synthesizes as it did when every resource
// made one: absent when unset, written when given in the config, by putTimeouts, or cleared by resetTimeouts.
import { describe, expect, it } from 'vitest';
import { App, TerraformStack, Testing } from 'cdktf';
import { Project } from 'kms-sync/cdktf';
import { scratchDir } from '../support/scratch.js';

function synthProjects(make: (s: TerraformStack) => void): Record<string, Record<string, unknown>> {
  const app = new App({ outdir: scratchDir('kms-sync-timeouts-') });
  const s = new TerraformStack(app, 'main');
  make(s);
  const json = JSON.parse(Testing.synth(s)) as { resource: { kms_project: Record<string, Record<string, unknown>> } };
  return json.resource.kms_project;
}

describe('timeouts block of a generated resource', () => {
  it('is absent when unset and written when set in the config, by putTimeouts, or cleared by resetTimeouts', () => {
    const r = synthProjects((s) => {
      new Project(s, 'plain', { slug: 'plain', name: 'Plain' });
      new Project(s, 'config', { slug: 'config', name: 'Config', timeouts: { create: '5m', delete: '1m' } });
      new Project(s, 'put', { slug: 'put', name: 'Put' }).putTimeouts({ update: '2m' });
      const reset = new Project(s, 'reset', { slug: 'reset', name: 'Reset', timeouts: { create: '9m' } });
      reset.resetTimeouts();
      const read = new Project(s, 'read', { slug: 'read', name: 'Read' });
      expect(read.timeoutsInput).toBeUndefined();
      expect(read.timeouts).toBeDefined();
    });
    expect(r.plain).not.toHaveProperty('timeouts');
    expect(r.config?.timeouts).toEqual({ create: '5m', delete: '1m' });
    expect(r.put?.timeouts).toEqual({ update: '2m' });
    expect(r.reset).not.toHaveProperty('timeouts');
    expect(r.read).not.toHaveProperty('timeouts');
  });
});
