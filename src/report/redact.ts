// Last line of defence for reports that leave the machine (PR comments, step summaries): nothing
// shaped like a raw customer key or a project key, no credential kms-sync knows (by value, also
// inside longer strings: model/redact.ts), and no credentials inside URLs.
// The shapes and the marker are model/redact.ts's: one spelling of a redacted value everywhere.
import { redactCredentials } from '../model/redact.js';

export function redactReport(text: string): string {
  return redactCredentials(text);
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
