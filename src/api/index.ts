export * from './http.js';
export * from './client.js';
export * from './shapes.js';
