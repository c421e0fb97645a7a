/**
 * GitLab CI/CD project variables, over the REST API (v4).
 *
 *   gitlab://<project id>[?environment_scope=production&protected=true&hidden=false]
 *   gitlab://<url-encoded namespace%2Fproject>[?...]   (gitlab://group/sub/project works too)
 *
 * Routes (docs.gitlab.com/api/project_level_variables):
 *   GET  /projects/:id/variables?per_page&page                         → [variable]   (X-Next-Page)
 *   GET  /projects/:id/variables/:key?filter[environment_scope]=scope  → variable | 404
 *   POST /projects/:id/variables        {key, value, masked, protected, raw, environment_scope, ...}
 *   PUT  /projects/:id/variables/:key?filter[environment_scope]=scope  {value, ...}
 *   GET  /projects/:id, GET /personal_access_tokens/self                (write check)
 *
 * Every variable is masked (GitLab's rule: ≥ 8 characters from the base64 alphabet plus @ : . ~ -
 * and _; raw keys `kmsc_…` qualify: anything else is refused before a request), raw (no `$`
 * expansion) and, by default, protected. The description carries the key id, the logical name and
 * the service target (when known), so `list` can report stale keys and whose they are.
 * Auth: GITLAB_TOKEN (a project/group/personal access token with the `api` scope and the
 * Maintainer role); CI_JOB_TOKEN cannot manage variables.
 * CI_API_V4_URL (default https://gitlab.com/api/v4) selects the instance.
 */
import { SecretStoreError, type SecretStoreErrorCode } from '../errors.js';
import {
  targetTag,
  type SecretEntry,
  type SecretListing,
  type SecretMetadata,
  type SecretStore,
  type StoreBackend,
} from '../store.js';
import {
  HttpClient,
  checkKnownParams,
  decodeComponent,
  envOf,
  header,
  latestPerName,
  mapLimit,
  optBool,
  optString,
  putAll,
  serverMessage,
  validateEntry,
  type BackendOpenOptions,
  type HttpResponse,
  RemoteStoreBase,
} from './common.js';
import { envStyleName } from './names.js';
import { refusePlainHttp } from './plain-http.js';
import { redactUserinfo } from '../../model/redact.js';

export const GITLAB_SCHEMES: readonly string[] = ['gitlab'];
export const GITLAB_URI_FORMS: readonly string[] = [
  'gitlab://<project id>[?environment_scope=production&protected=true&hidden=false&prefix=KMS_]',
  'gitlab://<group%2Fproject> (URL-encoded project path)',
];
const KNOWN_PARAMS = ['environment_scope', 'protected', 'hidden', 'prefix'] as const;
export const GITLAB_RESERVED_PREFIXES: readonly string[] = ['CI_', 'GITLAB_'];
export const GITLAB_NAME_MAX = 255;
/** GitLab's masking rule (Ci::Maskable): single line, ≥ 8 chars of the base64 alphabet plus @:.~-_ */
export const GITLAB_MASKABLE = /^[A-Za-z0-9_+=/@:.~-]{8,}$/;
const CONCURRENCY = 4;
const MAINTAINER = 40;

export interface GitLabConfig {
  apiUrl: URL;
  /** The project id or full path, as given (decoded). */
  project: string;
  environmentScope: string;
  protected: boolean;
  hidden: boolean;
  prefix: string;
  token: string | undefined;
  /** Set when only CI_JOB_TOKEN is present (explained in errors). */
  onlyJobToken: boolean;
  displayUri: string;
}

export function parseGitLabUri(uri: string, opts: BackendOpenOptions = {}): GitLabConfig {
  const bad = (why: string): SecretStoreError =>
    new SecretStoreError(`invalid store URI '${redactUserinfo(uri)}': ${why}; use ${GITLAB_URI_FORMS.join(' or ')}`, {
      code: 'INVALID_URI',
    });
  const m = /^gitlab:\/\/([^?#]*)(\?[^#]*)?$/i.exec(uri);
  if (!m) throw bad('expected gitlab://<project>');
  const rawPath = (m[1] ?? '').replace(/^\/+|\/+$/g, '');
  if (rawPath === '') throw bad('no project');
  if (rawPath.includes('@')) throw bad('credentials do not belong in the URI (use GITLAB_TOKEN)');
  const project = rawPath
    .split('/')
    .map((p) => decodeComponent(p, bad))
    .join('/');
  if (project.split('/').some((p) => p === '' || p === '.' || p === '..'))
    throw bad(`'${project}' is not a project id or path`);
  const query = new URLSearchParams((m[2] ?? '').slice(1));
  checkKnownParams(query, KNOWN_PARAMS, bad);
  const environmentScope = optString(query, opts, 'environment_scope') || '*';
  const prefix = (optString(query, opts, 'prefix') ?? '').toUpperCase();
  if (
    prefix !== '' &&
    (!/^[A-Z_][A-Z0-9_]*$/.test(prefix) || GITLAB_RESERVED_PREFIXES.some((p) => prefix.startsWith(p)))
  ) {
    throw bad(`prefix '${prefix}' must be letters, digits and underscores, not start with a digit, CI_ or GITLAB_`);
  }
  const env = envOf(opts);
  let apiUrl: URL;
  try {
    apiUrl = new URL((env.CI_API_V4_URL || 'https://gitlab.com/api/v4').replace(/\/+$/, '') + '/');
  } catch {
    throw bad('CI_API_V4_URL is not a URL');
  }
  refusePlainHttp(apiUrl, 'CI_API_V4_URL', 'gitlab-variables');
  const token = env.GITLAB_TOKEN || undefined;
  const qs = new URLSearchParams({ environment_scope: environmentScope });
  if (prefix) qs.set('prefix', prefix);
  return {
    apiUrl,
    project,
    environmentScope,
    protected: optBool(query, opts, 'protected', true, bad),
    hidden: optBool(query, opts, 'hidden', false, bad),
    prefix,
    token,
    onlyJobToken: !token && !!env.CI_JOB_TOKEN,
    displayUri: `gitlab://${encodeURIComponent(project)}?${qs.toString()}`,
  };
}

export async function openGitLabStore(uri: string, opts: BackendOpenOptions = {}): Promise<GitLabVariablesStore> {
  return new GitLabVariablesStore(parseGitLabUri(uri, opts));
}

export const gitlabBackend: StoreBackend = {
  schemes: GITLAB_SCHEMES,
  forms: GITLAB_URI_FORMS,
  open: (uri, opts) => openGitLabStore(uri, opts),
};

interface GitLabVariable {
  key: string;
  value: string | null;
  environment_scope: string;
  description: string | null;
}

const DESCRIPTION_MAX = 255;

/**
 * `kms-sync key=<keyId> issued=<date> expires=<date|never> name=<env>/<client>/<key> target=<target>`,
 * under GitLab's 255 characters. The target (only when known) comes last, with `%` and white space
 * percent-encoded so it stays one word; when the whole does not fit, the name goes first, then the
 * target becomes its `targetTag` (store.ts).
 */
export function describeMeta(meta: SecretMetadata): string {
  const base = `kms-sync key=${meta.keyId} issued=${meta.issuedAt} expires=${meta.expiresAt ?? 'never'}`;
  const name = ` name=${meta.projectEnv}/${meta.client}/${meta.key}`;
  const targets =
    typeof meta.target === 'string'
      ? [` target=${encodeWord(meta.target)}`, ` target=${targetTag(meta.target)}`]
      : [''];
  for (const t of targets) {
    for (const d of [base + name + t, base + t]) if (d.length <= DESCRIPTION_MAX) return d;
  }
  return base.slice(0, DESCRIPTION_MAX);
}

/** `%`, white space and control characters percent-encoded (UTF-8): the text is one word. */
function encodeWord(s: string): string {
  return s.replace(/[%\s\u0000-\u001f\u007f]/gu, (ch) => encodeURIComponent(ch));
}

function decodeWord(s: string): string {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

export function parseMetaDescription(description: string | null | undefined): Partial<SecretMetadata> | undefined {
  if (typeof description !== 'string' || !description.startsWith('kms-sync ')) return undefined;
  const meta: Partial<SecretMetadata> = {};
  // Last, and anchored there; cut off before the other fields are read, so a target's text
  // (`?name=…`) is never taken for one of them.
  const t = / target=(\S+)$/.exec(description);
  const target = t?.[1];
  const d = t ? description.slice(0, t.index) : description;
  const key = /\bkey=(\S+)/.exec(d)?.[1];
  const issued = /\bissued=(\S+)/.exec(d)?.[1];
  const expires = /\bexpires=(\S+)/.exec(d)?.[1];
  const name = /\bname=(\S+)/.exec(d)?.[1];
  if (key) meta.keyId = key;
  if (issued) meta.issuedAt = issued;
  if (expires) meta.expiresAt = expires === 'never' ? null : expires;
  if (target) meta.target = decodeWord(target);
  const parts = name?.split('/');
  if (parts && parts.length === 3) {
    meta.projectEnv = parts[0];
    meta.client = parts[1];
    meta.key = parts[2];
  }
  return meta;
}

export class GitLabVariablesStore extends RemoteStoreBase implements SecretStore {
  readonly kind = 'gitlab';
  readonly displayUri: string;
  readonly config: GitLabConfig;
  private readonly http = new HttpClient({ service: 'GitLab API' });

  constructor(config: GitLabConfig) {
    super();
    this.config = config;
    this.displayUri = config.displayUri;
  }

  /** `acme-production/globex/primary` → `ACME_PRODUCTION__GLOBEX__PRIMARY` (see names.ts). */
  secretName(logical: string): string {
    return envStyleName(logical, {
      reservedPrefixes: GITLAB_RESERVED_PREFIXES,
      prefix: this.config.prefix,
      maxLength: GITLAB_NAME_MAX,
    });
  }

  async checkWritable(): Promise<void> {
    try {
      // The token's scopes (personal, project and group access tokens answer this).
      const self = await this.call('GET', 'personal_access_tokens/self', undefined, true);
      if (self.status === 401) throw this.httpFailure('the token was refused', self);
      if (self.status === 200) {
        const b = self.body as { scopes?: unknown; active?: unknown; revoked?: unknown };
        const scopes = Array.isArray(b.scopes) ? b.scopes : [];
        if (!scopes.includes('api')) {
          throw this.error(
            `the token has scopes [${scopes.join(', ')}]; managing CI/CD variables needs the 'api' scope`,
            'NOT_WRITABLE',
          );
        }
      }
      const proj = await this.call('GET', this.projectRoute(), undefined, true);
      if (proj.status !== 200) throw this.httpFailure(`cannot see project ${this.config.project}`, proj);
      const perms = (
        proj.body as {
          permissions?: {
            project_access?: { access_level?: unknown } | null;
            group_access?: { access_level?: unknown } | null;
          };
        }
      ).permissions;
      const levels = [perms?.project_access?.access_level, perms?.group_access?.access_level].filter(
        (x): x is number => typeof x === 'number',
      );
      if (levels.length > 0 && Math.max(...levels) < MAINTAINER) {
        throw this.error(
          `the token's role in project ${this.config.project} is below Maintainer (access level ${Math.max(...levels)} < ${MAINTAINER}); CI/CD variables need Maintainer`,
          'NOT_WRITABLE',
        );
      }
      // Listing variables needs the same role as writing them (Maintainer).
      const vars = await this.call('GET', `${this.projectRoute()}/variables?per_page=1`, undefined, true);
      if (vars.status !== 200) throw this.httpFailure('cannot manage CI/CD variables', vars);
    } catch (err) {
      throw this.wrap(err, 'is not writable', 'NOT_WRITABLE');
    }
  }

  async putMany(entries: SecretEntry[]): Promise<void> {
    if (entries.length === 0) return;
    for (const e of entries) {
      validateEntry(e, (m) => this.error(m, 'INVALID_ARGUMENT'));
      this.checkName(e.name);
      if (!GITLAB_MASKABLE.test(e.value)) {
        // Never quote the value: say what is wrong with it only.
        const why =
          e.value.length < 8
            ? 'it is shorter than 8 characters'
            : /\s/.test(e.value)
              ? 'it contains whitespace'
              : 'it contains characters outside the base64 alphabet and @ : . ~ - _';
        throw this.error(
          `secret ${e.name}: the value cannot be masked by GitLab (${why}); refusing to store it as a visible variable`,
          'INVALID_ARGUMENT',
        );
      }
    }
    await putAll(
      latestPerName(entries),
      CONCURRENCY,
      async (e) => {
        try {
          await this.putOne(e);
        } catch (err) {
          throw this.wrap(err, `could not store ${e.name}`, 'IO');
        }
      },
      (m, c) => this.error(m, c),
    );
  }

  override async exists(name: string): Promise<boolean> {
    return this.guard(async () => (await this.getVariable(this.checkName(name))) !== undefined, 'cannot be read');
  }

  async existsMany(names: string[]): Promise<Set<string>> {
    if (names.length <= 3) {
      const out = new Set<string>();
      await mapLimit(names, CONCURRENCY, async (n) => {
        if (await this.exists(n)) out.add(n);
      });
      return out;
    }
    const listed = new Set((await this.list()).map((l) => l.name));
    return new Set(names.filter((n) => listed.has(n)));
  }

  /** The value, unless the variable is hidden (GitLab then returns none). */
  async read(name: string): Promise<string | undefined> {
    return this.guard(async () => {
      const v = await this.getVariable(this.checkName(name));
      return typeof v?.value === 'string' ? v.value : undefined;
    }, 'cannot be read');
  }

  /** Variables of this store's environment scope; dates are not kept by GitLab (updatedAt = issuedAt). */
  async list(): Promise<SecretListing[]> {
    return this.guard(async () => {
      const out: SecretListing[] = [];
      let page = '1';
      for (let i = 0; i < 1000 && page; i++) {
        const res = await this.call(
          'GET',
          `${this.projectRoute()}/variables?per_page=100&page=${encodeURIComponent(page)}`,
          undefined,
          true,
        );
        if (res.status !== 200) throw this.httpFailure('could not list variables', res);
        const items = Array.isArray(res.body) ? (res.body as GitLabVariable[]) : [];
        for (const v of items) {
          if (typeof v.key !== 'string' || v.environment_scope !== this.config.environmentScope) continue;
          if (this.config.prefix && !v.key.startsWith(this.config.prefix)) continue;
          const meta = parseMetaDescription(v.description);
          out.push({ name: v.key, updatedAt: meta?.issuedAt ?? '', ...(meta ? { meta } : {}) });
        }
        const next = header(res, 'x-next-page');
        page =
          next && next !== ''
            ? next
            : items.length === 100 && !header(res, 'x-total-pages')
              ? String(Number(page) + 1)
              : '';
      }
      return out.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    }, 'cannot be listed');
  }

  // -------------------------------------------------------------------------------------------

  private async putOne(e: SecretEntry): Promise<void> {
    const attrs = {
      value: e.value,
      variable_type: 'env_var',
      protected: this.config.protected,
      masked: true,
      raw: true,
      environment_scope: this.config.environmentScope,
      description: describeMeta(e.meta),
    };
    const existing = await this.getVariable(e.name);
    if (existing === undefined) {
      const created = await this.call(
        'POST',
        `${this.projectRoute()}/variables`,
        { key: e.name, ...attrs, ...(this.config.hidden ? { masked_and_hidden: true } : {}) },
        false,
      );
      if (created.status === 201) return;
      // Someone created it between our GET and POST: update instead.
      if (!(created.status === 400 && /already been taken|already exists/i.test(serverMessage(created)))) {
        throw this.httpFailure(`could not create ${e.name}`, created);
      }
    }
    const updated = await this.call('PUT', this.variableRoute(e.name), attrs, true);
    if (updated.status !== 200) throw this.httpFailure(`could not update ${e.name}`, updated);
  }

  private async getVariable(name: string): Promise<GitLabVariable | undefined> {
    const res = await this.call('GET', this.variableRoute(name), undefined, true);
    if (res.status === 404) return undefined;
    if (res.status !== 200) throw this.httpFailure(`could not read ${name}`, res);
    const v = res.body as GitLabVariable;
    return typeof v?.key === 'string' ? v : undefined;
  }

  private checkName(name: string): string {
    if (!/^[A-Za-z0-9_]{1,255}$/.test(name)) {
      throw this.error(
        `'${name}' is not a legal GitLab variable key ([A-Za-z0-9_], at most 255); pass logical names through secretName()`,
        'INVALID_ARGUMENT',
      );
    }
    return name;
  }

  private projectRoute(): string {
    return `projects/${encodeURIComponent(this.config.project)}`;
  }

  private variableRoute(name: string): string {
    return `${this.projectRoute()}/variables/${encodeURIComponent(name)}?${new URLSearchParams({ 'filter[environment_scope]': this.config.environmentScope }).toString()}`;
  }

  private async call(method: string, route: string, json: unknown, idempotent: boolean): Promise<HttpResponse> {
    const token = this.config.token;
    if (!token) {
      throw this.error(
        this.config.onlyJobToken
          ? 'only CI_JOB_TOKEN is set, and a job token cannot read or write CI/CD variables: set GITLAB_TOKEN to a project access token (Maintainer role, api scope)'
          : 'no GitLab token: set GITLAB_TOKEN (Maintainer role, api scope; see docs/secret-stores.md)',
        'NOT_WRITABLE',
      );
    }
    return this.http.send({
      method,
      url: new URL(route, this.config.apiUrl),
      headers: { 'private-token': token, 'user-agent': 'kms-sync' },
      ...(json !== undefined ? { json } : {}),
      idempotent,
    });
  }

  private httpFailure(what: string, res: HttpResponse): SecretStoreError {
    const code: SecretStoreErrorCode = res.status === 401 || res.status === 403 ? 'NOT_WRITABLE' : 'IO';
    let hint = '';
    if (res.status === 401) hint = ' (the token is invalid, expired or revoked)';
    else if (res.status === 403) hint = ' (CI/CD variables need the Maintainer role and a token with the api scope)';
    else if (res.status === 404) hint = ` (project ${this.config.project} not found, or not visible to the token)`;
    return this.error(`${what}: HTTP ${res.status}: ${serverMessage(res)}${hint}`, code);
  }
}
