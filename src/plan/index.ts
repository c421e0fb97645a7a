export * from './types.js';
export * from './diff.js';
export * from './scope.js';
export * from './drift.js';
export * from './ignore.js';
export * from '../model/ownership.js';
export * from './removal.js';
export * from './external.js';
