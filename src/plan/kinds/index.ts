// The registry of plan units, in dependency order (model's KIND_ORDER; a client's keys are planned
// with it). Adding a kind is adding its file and a line here. `buildPlan` (../diff.ts) runs them in
// this order; the operations are then sorted (creates and updates in dependency order, deletes in
// reverse), so this order decides only the order of the warnings.
import type { KindPlanner } from './contract.js';
import { clientPlanner } from './client.js';
import { endpointPlanner } from './endpoint.js';
import { envPlanner } from './env.js';
import { projectPlanner } from './project.js';
import { templatePlanner } from './template.js';

export const PLAN_KINDS: readonly KindPlanner[] = [
  projectPlanner,
  envPlanner,
  templatePlanner,
  clientPlanner,
  endpointPlanner,
];

export type { KindPlanner, PlanContext } from './contract.js';
