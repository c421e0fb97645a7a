// One measured benchmark run, in its own process (forked by bench/run.js), so that wall time, CPU
// and peak RSS are kms-sync's own. Prints one JSON line on stdout: wall time, phase breakdown,
// requests by kind (the transport's own `requestCounts`), CPU and peak RSS.
//
// Around the timed section it sends `mark` messages on the IPC channel and waits for the driver's
// acknowledgement: the driver resets/reads the emulator's per-route counts and CPU time there.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { KmsClient } from '../dist/api/client.js';
import { HttpTransport } from '../dist/api/http.js';
import { applyPlan } from '../dist/apply/execute.js';
import { JournaledKeyCapture } from '../dist/apply/journaled-capture.js';
import { readLiveState } from '../dist/live/read.js';
import { buildPlan } from '../dist/plan/diff.js';
import { AgeKeys, SopsFileStore } from '../dist/secrets/index.js';
import { StoreRegistry } from '../dist/secrets/registry.js';
import { desiredState, liveReadResult, SEED_URL, templateName } from './lib/fixtures.js';

const spec = JSON.parse(process.argv[2] ?? '{}');

class BenchFailure extends Error {}

/** Round trip to the driver (which snapshots the emulator) before/after the timed section. */
function mark(name) {
  if (!process.send) return Promise.resolve();
  return new Promise((ok) => {
    const onMsg = (m) => {
      if (m?.type === 'ack' && m.name === name) {
        process.off('message', onMsg);
        ok();
      }
    };
    process.on('message', onMsg);
    process.send({ type: 'mark', name });
  });
}

const cpuMs = (c) => (c.user + c.system) / 1000;
const total = (counts) => Object.values(counts).reduce((a, b) => a + b, 0);
const projectEnv = () => `${spec.project}-${spec.type}`;
const target = () => ({
  url: spec.url ?? 'memory',
  credential: 'test',
  envs: [projectEnv()],
  projects: [spec.project],
});
/** The client kms-sync builds (src/engine/run.ts): --parallelism for writes, the transport's default for reads. */
const api = (parallelism = spec.parallelism) =>
  new KmsClient({
    baseUrl: spec.url,
    apiKey: spec.apiKey,
    parallelism,
    userAgent: 'kms-sync-bench',
    ...(spec.readParallelism ? { readParallelism: spec.readParallelism } : {}),
  });

/** Runs `fn` as the timed section; returns its result with wall and CPU time. */
async function timed(fn) {
  if (global.gc) global.gc();
  await mark('start');
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  const out = await fn();
  const wallMs = performance.now() - t0;
  const cpu = cpuMs(process.cpuUsage(cpu0));
  await mark('end');
  return { ...out, wallMs, cpuMs: cpu };
}

function expectNoop(plan) {
  if (plan.operations.length || plan.unmanaged.length || plan.warnings.length) {
    const first = plan.operations.slice(0, 3).map((o) => `${o.action} ${o.address} (${o.reason})`);
    throw new BenchFailure(
      `the no-op plan is not empty: ${JSON.stringify(plan.summary)}; ${plan.warnings.length} warning(s); ${first.join('; ')}`,
    );
  }
}

function expectUpdates(plan, n) {
  const bad = plan.operations.filter((o) => o.kind !== 'client' || o.action !== 'update');
  if (bad.length || plan.operations.length !== n || plan.unmanaged.length) {
    throw new BenchFailure(
      `expected exactly ${n} client updates, got ${JSON.stringify(plan.summary)} (${bad
        .slice(0, 3)
        .map((o) => `${o.action} ${o.address}`)
        .join('; ')})`,
    );
  }
}

/** Scenarios 1 and 2: read + diff of a seeded environment that matches the desired state. */
async function noop() {
  const desired = desiredState(spec);
  const r = await timed(async () => {
    const client = api();
    const t0 = performance.now();
    const live = await readLiveState(
      client,
      { projects: [spec.project], envs: [projectEnv()] },
      { fingerprints: false },
    );
    const t1 = performance.now();
    const plan = buildPlan({ desired, live, prune: false, target: target() });
    const t2 = performance.now();
    await client.close();
    return { plan, client, phases: { readMs: t1 - t0, planMs: t2 - t1 } };
  });
  expectNoop(r.plan);
  return {
    wallMs: r.wallMs,
    cpuMs: r.cpuMs,
    phases: r.phases,
    requests: { ...r.client.http.requestCounts },
    summary: r.plan.summary,
  };
}

/** Scenario 4: read + diff + apply of a change to 1% of the clients. */
async function update() {
  const changed = (i) => i % spec.changeEvery === 0;
  const desired = desiredState({ ...spec, changed, revision: `run-${spec.run}` });
  const expected = desired.clients.filter((_, i) => changed(i)).length;
  const dir = mkdtempSync(path.join(tmpdir(), 'kms-sync-bench-'));
  try {
    const env = { SOPS_AGE_KEY_FILE: path.join(dir, 'age', 'keys.txt'), HOME: dir };
    const r = await timed(async () => {
      const client = api();
      const t0 = performance.now();
      const live = await readLiveState(
        client,
        { projects: [spec.project], envs: [projectEnv()] },
        { fingerprints: false },
      );
      const t1 = performance.now();
      const plan = buildPlan({ desired, live, prune: false, target: target() });
      const t2 = performance.now();
      expectUpdates(plan, expected);
      const keys = new JournaledKeyCapture(new StoreRegistry({ declarations: [], baseDir: dir, env }));
      const result = await applyPlan({ api: client, plan, keys, parallelism: spec.parallelism });
      const t3 = performance.now();
      await client.close();
      if (result.failed.length || result.stopReason)
        throw new BenchFailure(
          `apply failed: ${result.stopReason} ${result.failed
            .slice(0, 3)
            .map((f) => f.error)
            .join('; ')}`,
        );
      return { plan, client, result, phases: { readMs: t1 - t0, planMs: t2 - t1, applyMs: t3 - t2 } };
    });
    return {
      wallMs: r.wallMs,
      cpuMs: r.cpuMs,
      phases: r.phases,
      requests: { ...r.client.http.requestCounts },
      summary: r.plan.summary,
      changedObjects: expected,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Scenario 3: a new environment (templates only), 1,000 clients with keys created; every raw key journaled and stored. */
async function create() {
  const dir = mkdtempSync(path.join(tmpdir(), 'kms-sync-bench-'));
  try {
    const env = { SOPS_AGE_KEY_FILE: path.join(dir, 'age', 'keys.txt'), HOME: dir };
    const baseDir = path.join(dir, 'config');
    mkdirSync(baseDir);
    await new AgeKeys({ env }).recipients(); // the user's age identity exists before the run
    const maxClients = Math.ceil(spec.clients / spec.templates) + 10;
    const setup = api();
    await setup.createProject({
      slug: spec.project,
      name: spec.project,
      envs: [
        {
          type: spec.type,
          url: SEED_URL,
          templates: Array.from({ length: spec.templates }, (_, i) => ({
            name: templateName(i),
            rateLimitDay: 1000 + i,
            maxClients,
          })),
        },
      ],
    });
    await setup.close();
    const desired = desiredState({ ...spec, endpoints: 0, maxClients });

    const keyTimes = {
      captureMs: 0,
      captureCalls: 0,
      journalAppendMs: 0,
      storePutMs: 0,
      journalClearMs: 0,
      prepareMs: 0,
    };
    const timeOn = (obj, method, field) => {
      const orig = obj[method].bind(obj);
      obj[method] = async (...a) => {
        const t = performance.now();
        try {
          return await orig(...a);
        } finally {
          keyTimes[field] += performance.now() - t;
        }
      };
    };
    const registry = new StoreRegistry({ declarations: [], baseDir, env });
    const capture = new JournaledKeyCapture(registry);
    timeOn(capture.journal, 'appendMany', 'journalAppendMs');
    timeOn(capture.journal, 'clear', 'journalClearMs');
    timeOn(await registry.get(undefined), 'putMany', 'storePutMs'); // opening touches nothing on disk
    timeOn(capture, 'prepare', 'prepareMs');
    const origCapture = capture.capture.bind(capture);
    capture.capture = async (k) => {
      const t = performance.now();
      try {
        return await origCapture(k);
      } finally {
        keyTimes.captureMs += performance.now() - t;
        keyTimes.captureCalls++;
      }
    };

    const r = await timed(async () => {
      const client = api();
      const t0 = performance.now();
      const live = await readLiveState(
        client,
        { projects: [spec.project], envs: [projectEnv()] },
        { fingerprints: false },
      );
      const t1 = performance.now();
      const plan = buildPlan({ desired, live, prune: false, target: target() });
      const t2 = performance.now();
      if (plan.summary.create !== spec.clients || plan.operations.length !== spec.clients) {
        throw new BenchFailure(`expected ${spec.clients} client creates, got ${JSON.stringify(plan.summary)}`);
      }
      const result = await applyPlan({ api: client, plan, keys: capture, parallelism: spec.parallelism });
      const t3 = performance.now();
      await client.close();
      if (result.failed.length || result.stopReason)
        throw new BenchFailure(
          `apply failed: ${result.stopReason} ${result.failed
            .slice(0, 3)
            .map((f) => f.error)
            .join('; ')}`,
        );
      return { plan, client, result, phases: { readMs: t1 - t0, planMs: t2 - t1, applyMs: t3 - t2 } };
    });

    // Untimed: every raw key is in the default store, readable, and belongs to the live key.
    const wantKeys = spec.clients * spec.keysPerClient;
    if (r.result.keysStored.length !== wantKeys)
      throw new BenchFailure(`${r.result.keysStored.length} keys stored, expected ${wantKeys}`);
    const store = new SopsFileStore(path.join(baseDir, '.kms-sync', 'secrets.sops.yaml'), { env });
    const values = await store.readAll();
    const check = api(16);
    const liveClients = await check.listClients(projectEnv());
    await check.close();
    let verified = 0;
    for (const c of liveClients) {
      for (const k of c.keys ?? []) {
        const v = values.get(store.secretName(`${projectEnv()}/${c.name}/${k.name}`));
        if (v === undefined || !k.keyPrefix || !v.startsWith(k.keyPrefix))
          throw new BenchFailure(`key ${c.name}/${k.name} is not readable from the store`);
        verified++;
      }
    }
    if (verified !== wantKeys || values.size !== wantKeys)
      throw new BenchFailure(`${verified} keys verified, ${values.size} in the store, expected ${wantKeys}`);
    const pending = await capture.journal.pendingIds();
    if (pending.length) throw new BenchFailure(`${pending.length} journal entries left behind`);
    return {
      wallMs: r.wallMs,
      cpuMs: r.cpuMs,
      phases: { ...r.phases, ...keyTimes },
      requests: { ...r.client.http.requestCounts },
      summary: r.plan.summary,
      keysVerified: verified,
    };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Scenario 5: buildPlan only, desired vs live in memory. */
async function diff() {
  const changed = (i) => i % spec.changeEvery === 0;
  const desired = desiredState({ ...spec, changed, revision: 'changed' });
  const expected = desired.clients.filter((_, i) => changed(i)).length;
  const live = liveReadResult(spec);
  const r = await timed(async () => ({ plan: buildPlan({ desired, live, prune: false, target: target() }) }));
  expectUpdates(r.plan, expected);
  return { wallMs: r.wallMs, cpuMs: r.cpuMs, phases: { planMs: r.wallMs }, requests: {}, summary: r.plan.summary };
}

/** Runs `fn` over items with `n` workers (Terraform's -parallelism). */
async function pool(items, n, fn) {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, items.length) }, async () => {
      while (next < items.length) await fn(items[next++]);
    }),
  );
}

/**
 * The per-resource-refresh baseline: one GET per resource (project, each client, each endpoint) at
 * parallelism 10, the way Terraform refreshes its state, then the same writes one by one. The ids
 * come from an untimed listing (Terraform has them in its state file). With `sample`, only that
 * many resources are fetched and the refresh time is scaled up linearly (requests are counted exactly).
 */
async function baseline() {
  const pe = projectEnv();
  const lister = api(16);
  const clients = await lister.listClients(pe);
  const endpoints = await lister.listEndpoints(pe);
  await lister.close();
  const all = clients.length + endpoints.length;
  const fraction = spec.sample && spec.sample < all ? spec.sample / all : 1;
  const sampleClients = clients.slice(0, Math.round(clients.length * fraction));
  const sampleEndpoints = endpoints.slice(0, Math.round(endpoints.length * fraction));
  const writes = spec.changeEvery ? clients.filter((c) => Number(c.metadata?.index) % spec.changeEvery === 0) : [];
  const http = new HttpTransport({
    baseUrl: spec.url,
    apiKey: spec.apiKey,
    parallelism: 10,
    readParallelism: 10,
    userAgent: 'terraform-like-baseline',
  });
  const client = new KmsClient(http);
  const r = await timed(async () => {
    const t0 = performance.now();
    await client.getProject(pe);
    const items = [...sampleClients.map((c) => ['c', c]), ...sampleEndpoints.map((e) => ['e', e])];
    await pool(items, 10, async ([kind, x]) => {
      if (kind === 'c') await client.getClient(x.id ?? x.client_uuid, pe);
      else
        await http.request({
          method: 'GET',
          path: `/endpoint/${encodeURIComponent(`${x.method}:${x.path}`)}`,
          query: { project_env: pe },
          kind: 'get endpoint',
        });
    });
    const t1 = performance.now();
    await pool(writes, 10, (c) =>
      client.updateClient(c.id ?? c.client_uuid, pe, { metadata: { ...c.metadata, rev: `baseline-${spec.run}` } }),
    );
    const t2 = performance.now();
    await client.close();
    return { phases: { refreshMs: t1 - t0, writeMs: t2 - t1 } };
  });
  const measured = { ...http.requestCounts };
  const scale = 1 / fraction;
  const refreshMs = r.phases.refreshMs * scale;
  const requests = {
    'get project': 1,
    'get client': clients.length,
    ...(endpoints.length ? { 'get endpoint': endpoints.length } : {}),
    ...(writes.length ? { 'update client': writes.length } : {}),
  };
  return {
    wallMs: fraction === 1 ? r.wallMs : refreshMs + r.phases.writeMs,
    measuredWallMs: r.wallMs,
    cpuMs: r.cpuMs,
    phases: { refreshMs, writeMs: r.phases.writeMs },
    requests,
    measuredRequests: measured,
    extrapolated: fraction < 1,
    sampled: sampleClients.length + sampleEndpoints.length,
    resources: all,
  };
}

const modes = { noop, update, create, diff, baseline };
try {
  const fn = modes[spec.mode];
  if (!fn) throw new BenchFailure(`unknown mode ${spec.mode}`);
  const out = await fn();
  const requests = out.requests;
  process.stdout.write(
    `${JSON.stringify({ ok: true, ...out, totalRequests: total(requests), maxRssKB: process.resourceUsage().maxRSS })}\n`,
  );
  process.exit(0);
} catch (e) {
  process.stdout.write(
    `${JSON.stringify({ ok: false, error: e instanceof Error ? (e instanceof BenchFailure ? e.message : e.stack) : String(e) })}\n`,
  );
  process.exit(1);
}
