// The provider's log, as Terraform reads plugin logs: JSON lines on stderr in hclog's format
// (`@level`, `@message`, `@timestamp`, `@module`), which go-plugin turns into lines of Terraform's
// own log (TF_LOG, TF_LOG_PATH) under the provider's name. The level is TF_LOG_PROVIDER, else
// TF_LOG; with neither set nothing is written. What is logged: RPCs, resource types, identities
// (the import ids: never a value of a resource), actions and durations. Never a raw key, an API
// key or a store credential: no attribute value other than identities reaches it.
const LEVELS = ['trace', 'debug', 'info', 'warn', 'error'] as const;
export type LogLevel = (typeof LEVELS)[number];

export interface ProviderLog {
  enabled(level: LogLevel): boolean;
  log(level: LogLevel, message: string, fields?: Record<string, string | number | boolean | undefined>): void;
}

/** The level Terraform asks for: TF_LOG_PROVIDER wins over TF_LOG; `json` is trace; off when unset or unknown. */
export function logLevelOf(env: NodeJS.ProcessEnv): LogLevel | undefined {
  const raw = (env.TF_LOG_PROVIDER || env.TF_LOG || '').trim().toLowerCase();
  if (raw === 'json') return 'trace';
  return (LEVELS as readonly string[]).includes(raw) ? (raw as LogLevel) : undefined;
}

export function providerLog(
  env: NodeJS.ProcessEnv,
  write: (line: string) => void = (l) => void process.stderr.write(l),
): ProviderLog {
  const level = logLevelOf(env);
  const min = level === undefined ? LEVELS.length : LEVELS.indexOf(level);
  const enabled = (l: LogLevel) => LEVELS.indexOf(l) >= min;
  return {
    enabled,
    log(l, message, fields = {}) {
      if (!enabled(l)) return;
      const extra: Record<string, string | number | boolean> = {};
      for (const [k, v] of Object.entries(fields)) if (v !== undefined) extra[k] = v;
      // hclog's timestamp layout (2006-01-02T15:04:05.000000Z07:00): go-plugin reads only that one.
      const timestamp = new Date().toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
      write(
        `${JSON.stringify({ '@level': l, '@message': message, '@module': 'kms', '@timestamp': timestamp, ...extra })}\n`,
      );
    },
  };
}
