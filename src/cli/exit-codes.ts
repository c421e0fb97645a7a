/** DESIGN.md "Plans": 0 no changes, 2 changes present, 1 error, 3 apply stopped part-way (engine/errors.ts). */
export { EXIT } from '../engine/errors.js';
