// The table of store backends (`openStore`: a URI's scheme picks the backend, loaded on first
// use) and the stores a configuration names (`stores:` plus the embedded default), resolved to
// opened SecretStore instances, once each, sharing one age identity set. The backends import
// store.ts (the interface) and never this file: the imports of secrets/ run one way.
import path from 'node:path';
import type { OperatorPolicy, StoreDeclaration } from '../model/index.js';
import { AgeKeys } from './age-keys.js';
import type { StateIncarnation } from './fsutil.js';
import { declaredRecipients, storePolicyProblems } from './store-policy.js';
import {
  safeUriForMessage,
  SecretStoreError,
  type OpenStoreOptions,
  type SecretStore,
  type StoreBackend,
} from './store.js';

/**
 * The backends, by scheme. Each backend module (and the SDK or HTTP stack behind it) is imported
 * only when a URI of its scheme is opened: `kms-sync --help`, `validate` and a run that only uses
 * the default store never load the cloud SDKs, undici or libsodium. The schemes and URI forms are
 * written here so that dispatch and error messages need no import; a test checks them against
 * each module's own `schemes` / `forms`.
 */
export interface LazyStoreBackend {
  schemes: readonly string[];
  forms: readonly string[];
  load: () => Promise<StoreBackend>;
}

export const STORE_BACKENDS: readonly LazyStoreBackend[] = [
  {
    schemes: ['sops', 'file'],
    forms: [
      'sops:///abs/path.yaml',
      'sops:relative/path.yaml',
      'file:///abs/path.yaml or file:relative/path.yaml (alias of sops:)',
    ],
    load: async () => {
      const m = await import('./sops/file-store.js');
      return {
        schemes: m.SOPS_SCHEMES,
        forms: m.SOPS_URI_FORMS,
        open: (uri, opts) => Promise.resolve(m.openSopsFileStore(uri, opts)),
      };
    },
  },
  {
    schemes: ['aws-sm'],
    forms: ['aws-sm://<region>/<prefix>[?kmsKeyId=<key>][&endpoint=<url>][&onDeleted=recover|fail]'],
    load: async () => (await import('./backends/aws.js')).awsSecretsManagerBackend,
  },
  {
    schemes: ['gcp-sm'],
    forms: ['gcp-sm://projects/<project>[/<prefix>][?endpoint=<url>]'],
    load: async () => (await import('./backends/gcp.js')).gcpSecretManagerBackend,
  },
  {
    schemes: ['azure-kv'],
    forms: [
      'azure-kv://<vault-name>[/<prefix>][?onDeleted=recover|fail]',
      'azure-kv://<vault host>[:port][/<prefix>] (e.g. myvault.vault.azure.cn)',
    ],
    load: async () => (await import('./backends/azure.js')).azureKeyVaultBackend,
  },
  {
    schemes: ['vault', 'openbao'],
    forms: [
      'vault://host:8200/<kv-v2 mount>/<prefix>[?tls=false&namespace=ns&mount=a/b]',
      'openbao://host:8200/<kv-v2 mount>/<prefix> (same options)',
    ],
    load: async () => (await import('./backends/vault.js')).vaultBackend,
  },
  {
    schemes: ['github'],
    forms: [
      'github://<owner>/<repo>[?prefix=KMS_] (repository secrets)',
      'github://<owner>/<repo>/environments/<environment> (environment secrets)',
    ],
    load: async () => (await import('./backends/github.js')).githubBackend,
  },
  {
    schemes: ['gitlab'],
    forms: [
      'gitlab://<project id>[?environment_scope=production&protected=true&hidden=false&prefix=KMS_]',
      'gitlab://<group%2Fproject> (URL-encoded project path)',
    ],
    load: async () => (await import('./backends/gitlab.js')).gitlabBackend,
  },
  {
    schemes: ['kubernetes', 'k8s'],
    forms: [
      'kubernetes://<namespace>/<secret-name> (one Secret, one data key per secret)',
      'kubernetes://<namespace>[?prefix=kms-] (one Secret per secret)',
    ],
    load: async () => (await import('./backends/kubernetes.js')).kubernetesBackend,
  },
];

export function supportedStoreSchemes(): string[] {
  return STORE_BACKENDS.flatMap((b) => b.schemes.map((s) => `${s}:`));
}

const SCHEME_RE = /^([A-Za-z][A-Za-z0-9+.-]*):/;

/**
 * Opens the store a URI names: `sops:///abs/secrets.yaml`, `sops:relative/secrets.yaml`
 * (relative to `opts.baseDir`), `file:` as an alias of `sops:`. Opening touches nothing on disk.
 */
export async function openStore(uri: string, opts: OpenStoreOptions = {}): Promise<SecretStore> {
  const forms = STORE_BACKENDS.flatMap((b) => b.forms).join(', ');
  const m = SCHEME_RE.exec(uri);
  if (!m) {
    throw new SecretStoreError(`secret store URI '${safeUriForMessage(uri)}' has no scheme; supported: ${forms}`, {
      code: 'UNKNOWN_SCHEME',
    });
  }
  const scheme = (m[1] as string).toLowerCase();
  const backend = STORE_BACKENDS.find((b) => b.schemes.includes(scheme));
  if (!backend) {
    throw new SecretStoreError(
      `unknown store scheme '${scheme}:' in '${safeUriForMessage(uri)}'; supported schemes: ${supportedStoreSchemes().join(', ')} (forms: ${forms})`,
      { code: 'UNKNOWN_SCHEME' },
    );
  }
  return (await backend.load()).open(uri, opts);
}

export const DEFAULT_STORE_NAME = 'default';
/** Beside the configuration, in a hidden folder the config loader never reads. */
export const DEFAULT_STORE_URI = 'sops:.kms-sync/secrets.sops.yaml';

export interface StoreRegistryOptions {
  declarations: StoreDeclaration[];
  /** Directory relative store URIs resolve against (the configuration's). */
  baseDir: string;
  /**
   * The operator's policy (model/policy.ts): checked for every store before it is opened, so a
   * store it refuses is never contacted. Required: every front end says which policy it runs under.
   */
  policy: OperatorPolicy;
  env?: NodeJS.ProcessEnv;
  onNotice?: (message: string) => void;
  /**
   * The caller owns the state folder these stores and the journal live in (the agent): every
   * lock file taken through this registry (file stores, the journal) records it, and breaks what
   * an earlier incarnation of that owner left. Without it (the CLI), a lock's pid and host judge it.
   */
  incarnation?: StateIncarnation;
}

export class StoreRegistry {
  readonly baseDir: string;
  readonly ageKeys: AgeKeys;
  private readonly uris = new Map<string, string>();
  /** Declared `options:` by store URI. */
  private readonly declaredOptions = new Map<string, Record<string, unknown>>();
  private readonly opened = new Map<string, Promise<SecretStore>>();
  /** The recipients of the declarations of each URI: a store is wrapped for its own, never another store's. */
  private readonly declaredRecipients = new Map<string, string[]>();
  private readonly namesByUri = new Map<string, string>();
  private readonly opts: OpenStoreOptions;
  readonly policy: OperatorPolicy;
  readonly incarnation: StateIncarnation | undefined;

  constructor(o: StoreRegistryOptions) {
    this.baseDir = o.baseDir;
    this.policy = o.policy;
    this.incarnation = o.incarnation;
    // The shared key provider (store files and the journal) has no extra recipients: the journal
    // is for the local identity alone, and each store adds its own declaration's recipients.
    this.ageKeys = new AgeKeys({ ...(o.env ? { env: o.env } : {}), ...(o.onNotice ? { onNotice: o.onNotice } : {}) });
    this.opts = {
      baseDir: o.baseDir,
      ageKeys: this.ageKeys,
      ...(o.env ? { env: o.env } : {}),
      ...(o.policy.allowNewRecipients ? { allowNewRecipients: true } : {}),
      ...(o.incarnation ? { incarnation: o.incarnation } : {}),
    };
    const declaredDefault = o.declarations.find((d) => d.default);
    this.uris.set(DEFAULT_STORE_NAME, declaredDefault?.uri ?? DEFAULT_STORE_URI);
    for (const d of o.declarations) {
      this.uris.set(d.name, d.uri);
      this.namesByUri.set(d.uri, d.name);
      if (d.options) this.declaredOptions.set(d.uri, { ...this.declaredOptions.get(d.uri), ...d.options });
      const r = declaredRecipients(d.options);
      if (r.length)
        this.declaredRecipients.set(d.uri, [...new Set([...(this.declaredRecipients.get(d.uri) ?? []), ...r])]);
    }
  }

  /** Why the operator policy refuses the store behind a URI (messages), or none. */
  policyProblems(uri: string): string[] {
    const name = this.namesByUri.get(uri) ?? (uri === this.uris.get(DEFAULT_STORE_NAME) ? DEFAULT_STORE_NAME : uri);
    return storePolicyProblems(
      {
        name,
        uri,
        ...(this.declaredOptions.has(uri)
          ? { options: this.declaredOptions.get(uri) as StoreDeclaration['options'] }
          : {}),
      },
      this.policy,
      this.baseDir,
    ).map((p) => p.message);
  }

  /** URI of a named store (undefined = the default store). */
  uriOf(name: string | undefined): string {
    const uri = this.uris.get(name ?? DEFAULT_STORE_NAME);
    if (!uri)
      throw new SecretStoreError(`no secret store named '${name}' is declared under stores:`, {
        code: 'INVALID_ARGUMENT',
      });
    return uri;
  }

  /** Opens (once) the store behind a name or a URI. */
  get(nameOrUri: string | undefined): Promise<SecretStore> {
    const uri = this.uris.get(nameOrUri ?? DEFAULT_STORE_NAME) ?? nameOrUri!;
    let p = this.opened.get(uri);
    if (!p) {
      const refused = this.policyProblems(uri);
      const options = this.declaredOptions.get(uri);
      const recipients = this.declaredRecipients.get(uri);
      p = refused.length
        ? Promise.reject(new SecretStoreError(refused.join('; '), { code: 'POLICY' }))
        : openStore(uri, { ...this.opts, ...(options ? { options } : {}), ...(recipients ? { recipients } : {}) });
      p.catch(() => undefined); // awaited by every caller; an unawaited rejection is not a crash
      this.opened.set(uri, p);
    }
    return p;
  }

  /** The default file store lives in the configuration folder: is it tracked by git there? */
  defaultIsLocalFile(): boolean {
    return /^(sops|file):/.test(this.uriOf(undefined));
  }

  journalPath(): string {
    return path.join(this.baseDir, '.kms-sync', 'journal');
  }
}
