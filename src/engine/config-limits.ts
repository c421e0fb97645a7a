// The size limits of configuration files a run reads (config/limits.ts: flags over
// KMS_SYNC_MAX_FILE_SIZE / KMS_SYNC_MAX_CONFIG_SIZE over the defaults); the flags themselves are
// the CLI's (cli/config-limits.ts).
import { configLimits, LimitSyntaxError, type ConfigLimits } from '../config/limits.js';
import { UsageError } from './errors.js';

export interface LimitFlags {
  maxFileSize?: string;
  maxConfigSize?: string;
}

export function limitsOf(o: LimitFlags, env: NodeJS.ProcessEnv = process.env): ConfigLimits {
  try {
    return configLimits(o, env);
  } catch (e) {
    if (e instanceof LimitSyntaxError) throw new UsageError(e.message);
    throw e;
  }
}
