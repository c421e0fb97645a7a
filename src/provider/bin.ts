#!/usr/bin/env node
// The terraform-provider-kms executable. Terraform starts it several times per command: Node's
// compile cache (model/compile-cache.ts, as the CLI's) is on before the provider's modules load.
import { enableCliCompileCache } from '../model/compile-cache.js';

enableCliCompileCache();
const { runProvider } = await import('./main.js');
// Exit explicitly once the host is done: open HTTP keep-alive sockets must not hold the process.
process.exit(await runProvider());
