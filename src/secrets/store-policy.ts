// What the operator policy (model/policy.ts) allows a store declaration: the host it contacts
// with the store's credentials, the CA it trusts, the recipients it adds, where its file lives.
// Checked per declaration (never per secret), when the configuration is validated (file:line,
// naming the policy setting) and again by the registry before a store is opened: nothing a
// policy refuses is ever contacted, read or written.
import { realpathSync } from 'node:fs';
import path from 'node:path';
import { POLICY_HOW, storeHostAllowed, type OperatorPolicy, type StoreDeclaration } from '../model/index.js';
import { redactUserinfo } from '../model/redact.js';
import { sopsUriToPath } from './sops/uri.js';

/**
 * Whether an `azure-kv://` authority names a host (`host.domain`, `host:port`, `[v6]`, contacted as
 * it is) rather than a Key Vault name (contacted as `<name>.vault.azure.net`). The backend and the
 * operator policy decide by this one rule, so no spelling reaches a host unchecked. Here, not in the
 * backends' modules: `validate` checks the policy without loading any backend.
 */
export const azureKvNamesHost = (authority: string): boolean => /[.:[]/.test(authority);

export interface StorePolicyProblem {
  /** The declaration's field (`uri`, `options.recipients`, …). */
  field: string;
  message: string;
}

const SCHEME = /^([A-Za-z][A-Za-z0-9+.-]*):/;

/** The recipients a declaration adds (its `options.recipients`), as written. */
export function declaredRecipients(options: Record<string, unknown> | undefined): string[] {
  const r = options?.recipients;
  return Array.isArray(r) ? r.filter((x): x is string => typeof x === 'string').map((x) => x.trim()) : [];
}

/** `realpath` of the longest existing prefix of `p`, with the rest appended: links above a new file count. */
export function realpathOfPrefix(p: string): string {
  const rest: string[] = [];
  for (let d = path.resolve(p); ; d = path.dirname(d)) {
    try {
      return path.join(realpathSync(d), ...rest.reverse());
    } catch {
      if (path.dirname(d) === d) return path.resolve(p);
      rest.push(path.basename(d));
    }
  }
}

export function isInside(child: string, parent: string): boolean {
  const rel = path.relative(parent, child);
  return rel === '' || (!rel.startsWith('..') && !path.isAbsolute(rel));
}

/** Host and port a URL-like text names (for `endpoint=` and vault hosts), or undefined. */
function hostOf(text: string, defaultPort: string): { host: string; port: string } | undefined {
  try {
    const u = new URL(text);
    if (!u.hostname) return undefined;
    return {
      host: u.hostname.toLowerCase(),
      port: u.port || (u.protocol === 'http:' ? '80' : u.protocol === 'https:' ? '443' : defaultPort),
    };
  } catch {
    return undefined;
  }
}

/**
 * Why the policy refuses a store declaration, field by field (empty: allowed). `root` is the
 * folder store files live in (the configuration's, or the agent's STATE/store); relative `sops:`
 * paths resolve against it.
 */
export function storePolicyProblems(
  decl: Pick<StoreDeclaration, 'name' | 'uri' | 'options'>,
  policy: OperatorPolicy,
  root: string,
): StorePolicyProblem[] {
  const problems: StorePolicyProblem[] = [];
  const uri = decl.uri;
  const shown = redactUserinfo(uri);
  const scheme = SCHEME.exec(uri)?.[1]?.toLowerCase();
  const opts = decl.options ?? {};
  const hostProblem = (field: string, host: string, port: string, what: string) => {
    if (storeHostAllowed(policy, host, port)) return;
    problems.push({
      field,
      message:
        `store "${decl.name}" would send its credentials to ${host}:${port} (${what}), a host the operator policy does not allow; ` +
        `allow it with ${POLICY_HOW.storeHosts} (e.g. KMS_SYNC_STORE_HOSTS=${host}:${port})`,
    });
  };
  if (scheme === 'sops' || scheme === 'file') {
    let file: string | undefined;
    try {
      file = sopsUriToPath(uri, root);
    } catch {
      file = undefined; // the store reports a malformed URI itself
    }
    if (file && !policy.storesOutsideRoot && !isInside(realpathOfPrefix(file), realpathOfPrefix(root))) {
      problems.push({
        field: 'uri',
        message:
          // No path of the host: the agent shows this on its page, in notifications and commit statuses.
          `store "${decl.name}" (${shown}) resolves outside the folder store files stay in (the configuration folder; the agent's STATE/store), and the operator policy keeps store files inside it; ` +
          `allow it with ${POLICY_HOW.storesOutsideRoot}`,
      });
    }
  } else if (scheme === 'vault' || scheme === 'openbao') {
    const at = hostOf(uri, '8200');
    if (at) hostProblem('uri', at.host, at.port, 'the Vault server of the URI');
  } else if (scheme === 'azure-kv') {
    const authority = /^azure-kv:\/\/([^/?#]*)/i.exec(uri)?.[1] ?? '';
    if (azureKvNamesHost(authority)) {
      const at = hostOf(`https://${authority}`, '443');
      if (at) hostProblem('uri', at.host, at.port, 'the Key Vault host of the URI');
      else
        problems.push({
          field: 'uri',
          message: `store "${decl.name}" (${shown}) names no host the operator policy could allow`,
        });
    }
  }
  // An endpoint override (aws-sm, gcp-sm) in the URI's query or the declaration's options.
  const query = /\?([^#]*)/.exec(uri)?.[1];
  const params = new URLSearchParams(query ?? '');
  for (const [field, value] of [
    ['uri', params.get('endpoint')],
    ['options.endpoint', typeof opts.endpoint === 'string' ? opts.endpoint : null],
  ] as const) {
    if (!value) continue;
    const at = hostOf(value, '443');
    if (at) hostProblem(field, at.host, at.port, 'its endpoint override');
    else
      problems.push({
        field,
        message: `store "${decl.name}": endpoint ${JSON.stringify(redactUserinfo(value))} is not a URL`,
      });
  }
  for (const [field, value] of [
    ['uri', params.get('cacert')],
    ['options.cacert', typeof opts.cacert === 'string' ? opts.cacert : null],
  ] as const) {
    if (!value) continue;
    const abs = path.resolve(value);
    if (!policy.caFiles.some((f) => path.resolve(f) === abs)) {
      problems.push({
        field,
        message:
          `store "${decl.name}" would trust the CA file ${JSON.stringify(value)}, which the operator policy does not allow (a CA chosen by the configuration lets it read the store's credentials); ` +
          `allow it with ${POLICY_HOW.caFiles} (an absolute path), or set VAULT_CACERT in the job`,
      });
    }
  }
  if (policy.recipients) {
    for (const r of declaredRecipients(opts)) {
      if (!policy.recipients.includes(r)) {
        problems.push({
          field: 'options.recipients',
          message: `store "${decl.name}" adds the age recipient ${r}, which the operator policy does not allow (a recipient can decrypt every key in the store); allow it with ${POLICY_HOW.recipients}`,
        });
      }
    }
  }
  return problems;
}
