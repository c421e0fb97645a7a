// How much configuration kms-sync reads: a size per file and in total, checked before a byte is
// parsed (a 60 MB YAML file took `validate` to 632 MB; a committed file is untrusted input). The
// operator sets them (flags, environment, the agent's own settings), never the configuration.

export interface ConfigLimits {
  /** Largest configuration file, in bytes. */
  fileBytes: number;
  /** Largest sum of all configuration files of one load, in bytes. */
  totalBytes: number;
}

const MB = 1024 * 1024;

/** Near 5 MB per file and 50 MB in all: 10,000 clients take about 2 MB of YAML. */
export const DEFAULT_CONFIG_LIMITS: Readonly<ConfigLimits> = Object.freeze({ fileBytes: 5 * MB, totalBytes: 50 * MB });

/** The environment variables of the limits (the flags --max-file-size and --max-config-size win over them). */
export const LIMIT_ENV = { fileBytes: 'KMS_SYNC_MAX_FILE_SIZE', totalBytes: 'KMS_SYNC_MAX_CONFIG_SIZE' } as const;

export class LimitSyntaxError extends Error {}

const UNITS: Record<string, number> = {
  '': 1,
  b: 1,
  k: 1024,
  kb: 1024,
  kib: 1024,
  m: MB,
  mb: MB,
  mib: MB,
  g: 1024 * MB,
  gb: 1024 * MB,
  gib: 1024 * MB,
};

/** `5MB`, `512k`, `1048576` → bytes (binary units: 1 MB = 1024 × 1024 bytes). */
export function parseSize(text: string, what: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(text);
  const unit = m ? UNITS[m[2]!.toLowerCase()] : undefined;
  const n = m && unit !== undefined ? Math.floor(Number(m[1]) * unit) : NaN;
  if (!Number.isSafeInteger(n) || n < 1)
    throw new LimitSyntaxError(
      `${what} must be a size such as 5MB, 512KB or 1048576 (got ${JSON.stringify(text.slice(0, 40))})`,
    );
  return n;
}

/** A size as people read it: `5 MB`, `512 KB`, `900 bytes`. */
export function formatSize(bytes: number): string {
  if (bytes >= MB && bytes % MB === 0) return `${bytes / MB} MB`;
  if (bytes >= MB) return `${(bytes / MB).toFixed(1).replace(/\.0$/, '')} MB`;
  if (bytes >= 1024) return `${Math.round(bytes / 1024)} KB`;
  return `${bytes} bytes`;
}

/** The limits from flags (when given) over the environment over the defaults. */
export function configLimits(
  flags: { maxFileSize?: string | undefined; maxConfigSize?: string | undefined } = {},
  env: NodeJS.ProcessEnv = process.env,
): ConfigLimits {
  const pick = (flag: string | undefined, name: string, fallback: number, shown: string) => {
    if (flag !== undefined) return parseSize(flag, shown);
    const v = env[name];
    return v === undefined || v === '' ? fallback : parseSize(v, name);
  };
  return {
    fileBytes: pick(flags.maxFileSize, LIMIT_ENV.fileBytes, DEFAULT_CONFIG_LIMITS.fileBytes, '--max-file-size'),
    totalBytes: pick(flags.maxConfigSize, LIMIT_ENV.totalBytes, DEFAULT_CONFIG_LIMITS.totalBytes, '--max-config-size'),
  };
}
