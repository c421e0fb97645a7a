// The operator's policy: what a configuration may reach (DESIGN.md "Trust boundary"). A
// configuration is reviewed data written by many (pull-request authors, committers); the policy
// comes from the operator alone — flags, environment, a policy file outside the configuration root
// (config/policy.ts reads it), the agent's own flags, the provider block — and a configuration can
// never widen it. Like Atlantis' server-side repo config and Flux's --no-remote-bases /
// --no-cross-namespace-refs, every default is the narrow one where a wider one could hand a
// pull request a credential, a host file or a key.

export interface OperatorPolicy {
  /**
   * Variables `${env:NAME}` may read: exact names or `PREFIX_*` globs. Default: none. A variable
   * that holds a credential is refused even when listed (model/redact.ts).
   */
  envAllow: string[];
  /**
   * Hosts a store declaration may name (a vault:/openbao: host, an azure-kv: host, an `endpoint=`
   * override): `host`, `host:port`, `*.domain`. Default: none. Stores whose host the configuration
   * does not choose (AWS/GCP/Azure defaults, GitHub, GitLab, Kubernetes: the operator's
   * environment picks those) need no entry.
   */
  storeHosts: string[];
  /** CA files (`cacert=`) a store declaration may name, as absolute paths. Default: none. */
  caFiles: string[];
  /**
   * age recipients a store declaration may add. Undefined (the default): any, each shown in the
   * plan, and added to a store that already holds keys only with allowNewRecipients.
   */
  recipients?: string[];
  /** Add a recipient to a store that already holds keys (`--allow-new-recipients`). Default: no. */
  allowNewRecipients: boolean;
  /** Store files outside the configuration folder (CLI) or STATE/store (agent). Default: no. */
  storesOutsideRoot: boolean;
  /** Where the policy came from, for messages ("policy file /etc/kms-sync/policy.yaml, KMS_SYNC_ENV_ALLOW"). */
  sources: string[];
}

export const DEFAULT_POLICY: Readonly<OperatorPolicy> = Object.freeze({
  envAllow: [],
  storeHosts: [],
  caFiles: [],
  allowNewRecipients: false,
  storesOutsideRoot: false,
  sources: [],
});

/** How to widen each setting, for the errors that name it. */
export const POLICY_HOW: Record<
  'envAllow' | 'storeHosts' | 'caFiles' | 'recipients' | 'allowNewRecipients' | 'storesOutsideRoot',
  string
> = {
  envAllow: 'env.allow in the operator policy (--policy FILE / KMS_SYNC_POLICY), or KMS_SYNC_ENV_ALLOW / --allow-env',
  storeHosts: 'stores.hosts in the operator policy (--policy FILE / KMS_SYNC_POLICY), or KMS_SYNC_STORE_HOSTS',
  caFiles: 'stores.caFiles in the operator policy (--policy FILE / KMS_SYNC_POLICY), or KMS_SYNC_STORE_CA_FILES',
  recipients: 'recipients.allow in the operator policy (--policy FILE / KMS_SYNC_POLICY), or KMS_SYNC_RECIPIENTS',
  allowNewRecipients:
    '--allow-new-recipients, recipients.allowNew in the operator policy, or KMS_SYNC_ALLOW_NEW_RECIPIENTS=1',
  storesOutsideRoot:
    'stores.outsideRoot in the operator policy (--policy FILE / KMS_SYNC_POLICY), or KMS_SYNC_STORES_OUTSIDE_ROOT=1',
};

/** Two policies from two operator sources (file, environment, flags): lists join, switches turn on. */
export function mergePolicies(a: OperatorPolicy, b: Partial<OperatorPolicy>): OperatorPolicy {
  const join = (x: string[], y: string[] | undefined) => [...new Set([...x, ...(y ?? [])])];
  const recipients =
    a.recipients === undefined && b.recipients === undefined ? undefined : join(a.recipients ?? [], b.recipients);
  return {
    envAllow: join(a.envAllow, b.envAllow),
    storeHosts: join(a.storeHosts, b.storeHosts),
    caFiles: join(a.caFiles, b.caFiles),
    ...(recipients ? { recipients } : {}),
    allowNewRecipients: a.allowNewRecipients || Boolean(b.allowNewRecipients),
    storesOutsideRoot: a.storesOutsideRoot || Boolean(b.storesOutsideRoot),
    sources: join(a.sources, b.sources),
  };
}

/** Whether `${env:name}` may be read: an exact name, or a `PREFIX*` glob, of envAllow. */
export function envAllowed(policy: Pick<OperatorPolicy, 'envAllow'>, name: string): boolean {
  return policy.envAllow.some((p) => (p.endsWith('*') ? name.startsWith(p.slice(0, -1)) : p === name));
}

/** Whether a store may contact `host` (lower case, `[v6]` bracketed) on `port`. */
export function storeHostAllowed(policy: Pick<OperatorPolicy, 'storeHosts'>, host: string, port: string): boolean {
  const h = host.toLowerCase();
  return policy.storeHosts.some((entry) => {
    const e = entry.trim().toLowerCase();
    const m = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(e);
    if (!m) return false;
    if (m[2] !== undefined && m[2] !== port) return false;
    const pattern = m[1]!;
    return pattern.startsWith('*.') ? h.endsWith(pattern.slice(1)) && h.length > pattern.length - 1 : pattern === h;
  });
}
