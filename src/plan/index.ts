export * from './types.js';
export * from './diff.js';
export * from './scope.js';
export * from './drift.js';
export * from './ignore.js';
export * from '../model/ownership.js';
export * from './removal.js';
export * from './external.js';
// The per-kind plan units (one file each under kinds/) and the rules both engines share.
export { PLAN_KINDS, type KindPlanner, type PlanContext } from './kinds/index.js';
export { planOwnership, targetMetadata } from './kinds/contract.js';
export { blockedOfClient, clientRecord } from './kinds/client.js';
export { endpointRecord } from './kinds/endpoint.js';
export { differingFields } from './compare.js';
export { capacityProblems, describeCapacity, type CapacityProblem } from './capacity.js';
