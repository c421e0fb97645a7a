export * from './text.js';
export * from './json.js';
export * from './markdown.js';
export * from './drift-text.js';
export * from './drift-json.js';
export * from './redact.js';
