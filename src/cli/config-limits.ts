// The size limits of configuration files as flags of every command that reads configuration
// (config/limits.ts: flags over KMS_SYNC_MAX_FILE_SIZE / KMS_SYNC_MAX_CONFIG_SIZE over the defaults).
import type { Command } from 'commander';
// Read by the engine (engine/config-limits.ts); the flags are the CLI's.
export { limitsOf, type LimitFlags } from '../engine/config-limits.js';

export function addLimitOptions(cmd: Command): Command {
  return cmd
    .option(
      '--max-file-size <size>',
      'largest configuration file read, e.g. 5MB (default: $KMS_SYNC_MAX_FILE_SIZE or 5MB)',
    )
    .option(
      '--max-config-size <size>',
      'largest sum of the configuration files read, e.g. 50MB (default: $KMS_SYNC_MAX_CONFIG_SIZE or 50MB)',
    );
}
