// The run's errors live in the engine (engine/errors.ts): every front end ends with them.
export { ExitWith, UsageError } from '../engine/errors.js';
