// The agent's log: one line per event on stdout, as text or JSON (--log-format json). Every line
// passes the CLI's redaction (credentials by value and by shape) and, as text, its escaping of
// text that came from the service or a configuration.
import { redactCredentials } from '../model/redact.js';
import { printable } from '../model/printable.js';

export type LogLevel = 'debug' | 'info' | 'warn' | 'error';
export type LogFields = Record<string, string | number | boolean | null | undefined>;

export interface Logger {
  log(level: LogLevel, msg: string, fields?: LogFields): void;
  info(msg: string, fields?: LogFields): void;
  warn(msg: string, fields?: LogFields): void;
  error(msg: string, fields?: LogFields): void;
}

export function createLogger(
  format: 'text' | 'json',
  write: (line: string) => void = (l) => process.stdout.write(l),
): Logger {
  const log = (level: LogLevel, msg: string, fields: LogFields = {}) => {
    const time = new Date().toISOString();
    const clean = Object.fromEntries(Object.entries(fields).filter(([, v]) => v !== undefined));
    if (format === 'json') {
      write(`${redactCredentials(JSON.stringify({ time, level, msg, ...clean }))}\n`);
      return;
    }
    const pairs = Object.entries(clean).map(
      ([k, v]) => `${k}=${typeof v === 'string' && /[\s"=]/.test(v) ? JSON.stringify(v) : String(v)}`,
    );
    write(
      `${redactCredentials(printable(`${time} ${level.toUpperCase().padEnd(5)} ${msg}${pairs.length ? ` ${pairs.join(' ')}` : ''}`))}\n`,
    );
  };
  return {
    log,
    info: (m, f) => log('info', m, f),
    warn: (m, f) => log('warn', m, f),
    error: (m, f) => log('error', m, f),
  };
}
