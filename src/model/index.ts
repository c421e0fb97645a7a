export * from './resources.js';
export * from './identity.js';
export * from './normalize.js';
export * from './collections.js';
export * from './ownership.js';
export * from './owner.js';
export * from './target.js';
export * from './policy.js';
