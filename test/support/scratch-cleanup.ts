// Vitest setup file (runs in each test file's worker): the file's scratch folders go after its last test.
import { afterAll } from 'vitest';
import { removeScratch } from './scratch.js';

afterAll(() => removeScratch());
