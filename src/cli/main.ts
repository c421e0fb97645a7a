#!/usr/bin/env node
// The kms-sync executable. Before anything else loads: refuse an old Node.js (node-version.ts), then
// turn on Node's compile cache (compile-cache.ts), which then covers every module of the CLI.
import './early-signals.js';
import './node-version.js';
import { enableCliCompileCache } from './compile-cache.js';

enableCliCompileCache();
await (await import('./run.js')).finished;
