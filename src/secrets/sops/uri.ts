// `sops:` / `file:` URIs to file paths: without the store's crypto, so that a policy check
// (secrets/store-policy.ts) can resolve a store's file without loading it.
import * as path from 'node:path';
import { SecretStoreError } from '../errors.js';
import { REDACTED } from '../../model/redact.js';

export const SOPS_SCHEMES: readonly string[] = ['sops', 'file'];
export const SOPS_URI_FORMS: readonly string[] = [
  'sops:///abs/path.yaml',
  'sops:relative/path.yaml',
  'file:///abs/path.yaml or file:relative/path.yaml (alias of sops:)',
];

/** Resolves a `sops:` / `file:` URI to an absolute path. */
export function sopsUriToPath(uri: string, baseDir: string = process.cwd()): string {
  const m = /^(sops|file):(.*)$/is.exec(uri);
  if (!m) throw new SecretStoreError(`not a sops:/file: URI: '${uri}'`, { code: 'INVALID_URI' });
  const rest = m[2] as string;
  const bad = (why: string): SecretStoreError =>
    new SecretStoreError(`invalid store URI '${uri}': ${why}; use ${SOPS_URI_FORMS.join(', ')}`, {
      code: 'INVALID_URI',
    });
  if (/[?#]/.test(rest)) throw bad('query strings and fragments are not supported');
  const decode = (s: string): string => {
    try {
      return decodeURIComponent(s);
    } catch {
      throw bad('malformed percent-encoding');
    }
  };
  if (rest.startsWith('//')) {
    const after = rest.slice(2);
    const slash = after.indexOf('/');
    const host = slash < 0 ? after : after.slice(0, slash);
    if (host !== '' && host.toLowerCase() !== 'localhost')
      throw bad(`remote host '${host.replace(/^.*@/, `${REDACTED}@`)}' is not supported`);
    const p = slash < 0 ? '' : after.slice(slash);
    if (p === '' || p === '/') throw bad('no file path');
    return path.resolve(decode(p));
  }
  if (rest === '') throw bad('no file path');
  return path.resolve(baseDir, decode(rest));
}
