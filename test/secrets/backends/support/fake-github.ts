// A fake GitHub REST API for Actions secrets (repository and environment), checked against GitHub's
// published description: every request must hit a described operation, its JSON body must match
// the operation's request schema, and every answer is validated against the response schema too.
// Values are sealed boxes for a key pair this fake holds (and can rotate).
import sodium from 'libsodium-wrappers';
import { loadGitHubDescription } from './github-openapi.js';
import { startRecordingServer, type Recorded, type RecordingServer, type Reply } from './recording-server.js';

export interface StoredGitHubSecret {
  name: string;
  encrypted_value: string;
  key_id: string;
  created_at: string;
  updated_at: string;
}

export interface FakeGitHubOptions {
  token: string;
  owner: string;
  repo: string;
  environments?: string[];
  /** Token lacks secrets write: PUT/DELETE answer 403. */
  readOnly?: boolean;
}

export interface FakeGitHub {
  server: RecordingServer;
  url: string;
  requests: Recorded[];
  /** Secrets by scope ('repo' or 'env:<name>') then upper-case name. */
  secrets: Map<string, Map<string, StoredGitHubSecret>>;
  /** Private keys by key_id (base64), for decrypting what was sent. */
  privateKeys: Map<string, string>;
  keyId: string;
  rotateKey(): Promise<void>;
  /** Problems found by the schema checks (must stay empty). */
  violations: string[];
  close(): Promise<void>;
}

export async function startFakeGitHub(o: FakeGitHubOptions): Promise<FakeGitHub> {
  await sodium.ready;
  const description = loadGitHubDescription();
  const secrets = new Map<string, Map<string, StoredGitHubSecret>>();
  const privateKeys = new Map<string, string>();
  const violations: string[] = [];
  let keyCounter = 0;
  let current = { keyId: '', publicKey: '' };
  const rotate = async (): Promise<void> => {
    const kp = sodium.crypto_box_keypair();
    keyCounter++;
    const keyId = `56832${String(keyCounter).padStart(12, '0')}`;
    privateKeys.set(keyId, sodium.to_base64(kp.privateKey, sodium.base64_variants.ORIGINAL));
    current = { keyId, publicKey: sodium.to_base64(kp.publicKey, sodium.base64_variants.ORIGINAL) };
  };
  await rotate();
  const envs = new Set(o.environments ?? []);
  const notFound: Reply = {
    status: 404,
    body: { message: 'Not Found', documentation_url: 'https://docs.github.com/rest', status: '404' },
  };

  const handler = (r: Recorded): Reply => {
    const reply = (status: number, body?: unknown, headers?: Record<string, string>): Reply => {
      if (op && status < 300) {
        const v = op.validateResponse.get(status);
        if (!op.validateResponse.has(status)) violations.push(`${op.operationId}: status ${status} is not described`);
        else if (v && !v(body))
          violations.push(`${op.operationId}: response ${status} does not match: ${JSON.stringify(v.errors)}`);
      }
      return { status, ...(body !== undefined ? { body } : {}), ...(headers ? { headers } : {}) };
    };
    const op = description.match(r.method, r.rawPath);
    if (!op) {
      violations.push(`no operation in GitHub's description for ${r.method} ${r.rawPath}`);
      return notFound;
    }
    if (r.headers.authorization !== `Bearer ${o.token}`)
      return { status: 401, body: { message: 'Bad credentials', status: '401' } };
    if (r.headers.accept !== 'application/vnd.github+json')
      violations.push(`${op.operationId}: accept header ${String(r.headers.accept)}`);
    if (r.headers['x-github-api-version'] !== '2022-11-28')
      violations.push(`${op.operationId}: no X-GitHub-Api-Version`);
    if (!r.headers['user-agent'])
      violations.push(`${op.operationId}: no User-Agent (GitHub rejects requests without one)`);
    if (op.validateBody) {
      if (r.headers['content-type'] !== 'application/json')
        violations.push(`${op.operationId}: content-type ${String(r.headers['content-type'])}`);
      if (!op.validateBody(r.json)) {
        violations.push(`${op.operationId}: request body does not match: ${JSON.stringify(op.validateBody.errors)}`);
        return { status: 422, body: { message: 'Invalid request.', status: '422' } };
      }
    }
    const p = op.params;
    if (p.owner !== o.owner || p.repo !== o.repo) return notFound;
    let scope = 'repo';
    if (p.environment_name !== undefined) {
      if (!envs.has(p.environment_name)) return notFound;
      scope = `env:${p.environment_name}`;
    }
    const bucket = secrets.get(scope) ?? new Map<string, StoredGitHubSecret>();
    secrets.set(scope, bucket);
    if (op.route.endsWith('/public-key')) return reply(200, { key_id: current.keyId, key: current.publicKey });
    if (op.route.endsWith('/secrets')) {
      const perPage = Math.min(Number(r.query.get('per_page') ?? 30), 100);
      const page = Number(r.query.get('page') ?? 1);
      const all = [...bucket.values()].sort((a, b) => (a.name < b.name ? -1 : 1));
      const slice = all
        .slice((page - 1) * perPage, page * perPage)
        .map((s) => ({ name: s.name, created_at: s.created_at, updated_at: s.updated_at }));
      return reply(200, { total_count: all.length, secrets: slice });
    }
    const name = p.secret_name!;
    const key = name.toUpperCase();
    if (r.method === 'GET') {
      const s = bucket.get(key);
      return s ? reply(200, { name: s.name, created_at: s.created_at, updated_at: s.updated_at }) : notFound;
    }
    if (o.readOnly)
      return { status: 403, body: { message: 'Resource not accessible by personal access token', status: '403' } };
    if (r.method === 'DELETE') {
      if (!bucket.delete(key)) return notFound;
      return reply(204);
    }
    // PUT
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name) || /^GITHUB_/i.test(name)) {
      return {
        status: 422,
        body: {
          message:
            'Failed to add secret. Secret names can only contain alphanumeric characters ([a-z], [A-Z], [0-9]) or underscores (_).',
          status: '422',
        },
      };
    }
    const b = r.json as { encrypted_value: string; key_id: string };
    if (b.key_id !== current.keyId)
      return { status: 422, body: { message: 'Bad request - key_id mismatch', status: '422' } };
    const now = new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
    const existing = bucket.get(key);
    bucket.set(key, {
      name: key,
      encrypted_value: b.encrypted_value,
      key_id: b.key_id,
      created_at: existing?.created_at ?? now,
      updated_at: now,
    });
    return existing ? reply(204) : reply(201, {});
  };
  const server = await startRecordingServer(handler);
  return {
    server,
    url: server.url,
    requests: server.requests,
    secrets,
    privateKeys,
    get keyId() {
      return current.keyId;
    },
    rotateKey: rotate,
    violations,
    close: () => server.close(),
  };
}
