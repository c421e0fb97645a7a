// Template capacity is planned (issue 39 item 2): a configuration that would fill a template past
// its client maximum (declared, or the service's default of 100) is refused by plan and by apply
// before any write, one line per template naming it and the numbers. Only the clients that exist
// once the plan is applied count: live ones that stay, plus creates, minus deletes. The built CLI
// against the emulator, as a user runs it.
import { rmSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli, writeFiles } from '../support/cli.js';
import { setup, TEST_KEY, type Setup } from './helpers.js';

let s: Setup;
beforeAll(async () => {
  s = await setup({});
});
afterAll(async () => {
  await s?.emu.close();
  if (s) rmSync(s.dir, { recursive: true, force: true });
});
const cli = (args: string[]) => runCli(args, { cwd: s.dir, env: s.env });

const config = (template: string, clients: string[]) => `apiVersion: kms-sync/v1
projects:
  - slug: big
    name: Big
    environments:
      - type: prod
        url: https://big.example
        templates: [${template}]
        clients:
${clients.map((c) => `          - { name: ${c}, template: std }`).join('\n')}
`;
const names = (n: number, prefix = 'c') => Array.from({ length: n }, (_, i) => `${prefix}${i}`);

async function liveClients(): Promise<number> {
  const r = await fetch(`${s.emu.url}/client?project_env=big-prod&limit=100`, { headers: { 'x-api-key': TEST_KEY } });
  if (r.status === 404) return 0;
  const body = (await r.json()) as { pagination?: { total?: number }; data?: unknown[] };
  return body.pagination?.total ?? body.data?.length ?? 0;
}

describe('template capacity in the plan', () => {
  it('5,000 clients on a template without maxClients: plan and apply refuse with one line, nothing written', async () => {
    writeFiles(s.dir, { 'kms-sync.yaml': config('{ name: std, rateLimitDay: 10 }', names(5000)) });
    const plan = await cli(['plan']);
    expect(plan.code, plan.stderr).toBe(1);
    const lines = plan.stderr
      .trim()
      .split('\n')
      .filter((l) => l.trim() !== '');
    expect(lines, plan.stderr).toHaveLength(1);
    expect(lines[0]).toContain(
      "template.big-prod/std allows 100 client(s) (the service's default: no maxClients declared) but this plan would leave 5000 on it (0 now)",
    );
    expect(plan.stdout).toBe('');
    const json = await cli(['plan', '--json']);
    expect(json.code).toBe(1);
    expect(json.stdout).toBe('');
    const apply = await cli(['apply', '--yes']);
    expect(apply.code, apply.stderr).toBe(1);
    expect(apply.stderr).toContain('template.big-prod/std allows 100 client(s)');
    expect(apply.stdout + apply.stderr).not.toMatch(/part-way|FAILED|Unresolved/);
    const projects = (await (
      await fetch(`${s.emu.url}/project?limit=100`, { headers: { 'x-api-key': TEST_KEY } })
    ).json()) as { data: unknown[] };
    expect(projects.data).toHaveLength(0);
  });

  it('counts what exists after the plan: deletes make room, a declared maxClients is the limit', async () => {
    writeFiles(s.dir, { 'kms-sync.yaml': config('{ name: std, rateLimitDay: 10, maxClients: 3 }', names(3)) });
    expect((await cli(['apply', '--yes'])).code).toBe(0);
    expect(await liveClients()).toBe(3);
    // One more than the declared maximum: refused, naming it.
    writeFiles(s.dir, { 'kms-sync.yaml': config('{ name: std, rateLimitDay: 10, maxClients: 3 }', names(4)) });
    const over = await cli(['plan']);
    expect(over.code).toBe(1);
    expect(over.stderr).toContain(
      'template.big-prod/std allows 3 client(s) (its maxClients) but this plan would leave 4 on it (3 now)',
    );
    // Two of ours leave the configuration and two new ones come: it fits once applied, but apply
    // creates before it deletes, so the service would refuse the creates part-way: refused, with the way out.
    writeFiles(s.dir, {
      'kms-sync.yaml': config('{ name: std, rateLimitDay: 10, maxClients: 3 }', ['c0', 'n1', 'n2']),
    });
    const swap = await cli(['apply', '--yes']);
    expect(swap.code, swap.stdout + swap.stderr).toBe(1);
    expect(swap.stderr).toContain(
      'template.big-prod/std allows 3 client(s) (its maxClients); this plan leaves 3 on it, but apply creates before it deletes, so it would hold 5 part-way (3 now)',
    );
    expect(swap.stdout + swap.stderr).not.toMatch(/part-way\.|FAILED/);
    expect(await liveClients()).toBe(3);
    // The removal first, then the new ones: both fit.
    writeFiles(s.dir, { 'kms-sync.yaml': config('{ name: std, rateLimitDay: 10, maxClients: 3 }', ['c0']) });
    expect((await cli(['apply', '--yes'])).code).toBe(0);
    writeFiles(s.dir, {
      'kms-sync.yaml': config('{ name: std, rateLimitDay: 10, maxClients: 3 }', ['c0', 'n1', 'n2']),
    });
    const added = await cli(['apply', '--yes']);
    expect(added.code, added.stdout + added.stderr).toBe(0);
    expect(await liveClients()).toBe(3);
    // Raising maxClients in the same change makes room.
    writeFiles(s.dir, {
      'kms-sync.yaml': config('{ name: std, rateLimitDay: 10, maxClients: 5 }', ['c0', 'n1', 'n2', 'n3', 'n4']),
    });
    const raised = await cli(['apply', '--yes']);
    expect(raised.code, raised.stdout + raised.stderr).toBe(0);
    expect(await liveClients()).toBe(5);
    // Lowering it below what stays is refused too.
    writeFiles(s.dir, {
      'kms-sync.yaml': config('{ name: std, rateLimitDay: 10, maxClients: 4 }', ['c0', 'n1', 'n2', 'n3', 'n4']),
    });
    const lowered = await cli(['plan']);
    expect(lowered.code).toBe(1);
    expect(lowered.stderr).toContain('allows 4 client(s) (its maxClients) but this plan would leave 5 on it (5 now)');
  });
});
