#!/usr/bin/env node
// The terraform-provider-kms executable.
import { runProvider } from './main.js';

// Exit explicitly once the host is done: open HTTP keep-alive sockets must not hold the process.
process.exit(await runProvider());
