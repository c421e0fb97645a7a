// Last line of defence for reports that leave the machine (PR comments, step summaries): nothing
// shaped like a raw customer key or a project key, no credential kms-sync knows (by value, also
// inside longer strings: model/redact.ts), and no credentials inside URLs.
import { redactCredentials } from '../model/redact.js';

const CUSTOMER_KEY = /kmsc_[A-Za-z0-9_-]{8,}/g;
const PROJECT_KEY = /\bsk_(live|test)_[A-Za-z0-9._-]{4,}/g;
const AGE_SECRET = /AGE-SECRET-KEY-(?:PQ-)?1[0-9A-Z]+/g;

export function redactReport(text: string): string {
  return redactCredentials(text
    .replace(CUSTOMER_KEY, '[REDACTED customer key]')
    .replace(PROJECT_KEY, (m) => `${m.slice(0, 8)}[REDACTED]`)
    .replace(AGE_SECRET, 'AGE-SECRET-KEY-[REDACTED]'));
}

/** The URL without user info, query or fragment (they may carry credentials). */
export function safeUrl(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}${u.pathname}`;
  } catch {
    return url.replace(/\/\/[^@/]*@/, '//').replace(/[?#].*$/, '');
  }
}
