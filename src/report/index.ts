export * from './text.js';
export * from './json.js';
