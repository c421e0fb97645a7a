// Test files that share their worker process with other files (vitest `isolate: false`, the
// `shared` project of vitest.config.ts). A fresh worker per file costs ~0.35 CPU-s (a Node process,
// vitest's runtime, the imports again): on 37 short files that was ~13 of their ~25 CPU-s. Every
// other file keeps a worker of its own. A file belongs here only if it leaves no trace for the next
// file of its worker: no vi.mock/vi.stub*/fake timers, no process.env, process.chdir or globalThis
// changes it does not undo, no listener on `process` it does not remove, and no assertion on
// module-level state of src/ (the redaction registry of model/redact.ts, say) that another file
// may have filled. test/architecture/shared-workers.test.ts checks the names and the first rules.
export const SHARED_WORKER_FILES: string[] = [
  'test/agent/deploy-hardening.test.ts',
  'test/api/bad-answers.test.ts',
  'test/architecture/cpu-report.test.ts',
  'test/architecture/imports.test.ts',
  'test/architecture/one-engine.test.ts',
  'test/architecture/patience.test.ts',
  'test/architecture/plan-kinds.test.ts',
  'test/architecture/sequencer.test.ts',
  'test/architecture/shared-workers.test.ts',
  'test/bench/read-fast-paths.test.ts',
  'test/cdktf/app-environment.test.ts',
  'test/cdktf/expressions.test.ts',
  'test/cdktf/schema-parity.test.ts',
  'test/cli/compile-cache.test.ts',
  'test/config/fast-yaml.test.ts',
  'test/config/init-export.test.ts',
  'test/config/interpolate.test.ts',
  'test/config/merge.test.ts',
  'test/config/schema-standalone.test.ts',
  'test/config/schema.test.ts',
  'test/config/stream-decision.test.ts',
  'test/contract/emulator-http-limits.test.ts',
  'test/contract/emulator-robustness.test.ts',
  'test/docs/reference.test.ts',
  'test/drift/classify.test.ts',
  'test/engine/inventory-seal.test.ts',
  'test/model/address.test.ts',
  'test/model/collections.test.ts',
  'test/plan/capacity.test.ts',
  'test/plan/match-identity.test.ts',
  'test/provider/ownership.test.ts',
  'test/provider/protocol.test.ts',
  'test/secrets/backends/names.test.ts',
  'test/secrets/backends/registry.test.ts',
  'test/secrets/collisions.test.ts',
  'test/secrets/interop.test.ts',
  'test/secrets/target-guard.test.ts',
  'test/sync/diff-values.test.ts',
];
