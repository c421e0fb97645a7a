// The per-kind handlers: one module per resource kind, each the whole answer to "how is a X
// created, updated, deleted". The reconciler's scheduler (../execute.ts) and the Terraform
// provider (../../provider/) both call these, so the two engines cannot drift apart.
export * as projects from './project.js';
export * as envs from './env.js';
export * as templates from './template.js';
export * as clients from './client.js';
export * as keys from './key.js';
export * as endpoints from './endpoint.js';
