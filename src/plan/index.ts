export * from './types.js';
export * from './diff.js';
export * from './scope.js';
