// A local AWS Secrets Manager speaking the AWS JSON 1.1 protocol (POST /, X-Amz-Target:
// secretsmanager.<Operation>), with the documented ClientRequestToken semantics: a repeated token
// with the same value is ignored, with another value it is a ResourceExistsException.
import { randomUUID } from 'node:crypto';
import { startFake, type FakeServer, type RecordedRequest, type Reply } from './fake-http.js';

export interface AwsFakeVersion {
  token: string;
  value: string;
  stages: string[];
  created: number;
}

export interface AwsFakeSecret {
  name: string;
  arn: string;
  versions: AwsFakeVersion[];
  tags: Map<string, string>;
  description?: string;
  kmsKeyId?: string;
  deletedDate?: number;
  created: number;
  changed: number;
}

export interface AwsFake extends FakeServer {
  secrets: Map<string, AwsFakeSecret>;
  /** Return a reply to inject a failure for one call (checked before the operation runs). */
  fault: ((target: string, body: Record<string, unknown>) => Reply | undefined) | undefined;
  /** Targets (e.g. 'secretsmanager.PutSecretValue') answered with AccessDeniedException. */
  denied: Set<string>;
  /** Calls received, by operation name. */
  ops(): string[];
  /** The JSON body of each request. */
  bodies(op: string): Record<string, unknown>[];
  listPageSize: number;
}

/**
 * AWS's documented tag rules (Tag.Key / Tag.Value in the Secrets Manager API reference): keys of
 * 1-128, values of 0-256 characters, both of letters, separators, digits and _ . : / = + - @.
 */
const TAG_TEXT = /^[\p{L}\p{Z}\p{N}_.:/=+\-@]*$/u;
function badTags(tags: unknown): string | undefined {
  if (tags === undefined) return undefined;
  if (!Array.isArray(tags)) return 'Tags must be a list';
  for (const t of tags as { Key?: unknown; Value?: unknown }[]) {
    if (typeof t.Key !== 'string' || t.Key.length < 1 || t.Key.length > 128 || !TAG_TEXT.test(t.Key))
      return 'invalid tag key';
    if (typeof t.Value !== 'string' || t.Value.length > 256 || !TAG_TEXT.test(t.Value))
      return `invalid value for tag '${t.Key}'`;
  }
  return undefined;
}

const err = (type: string, message: string, status = 400): Reply => ({
  status,
  headers: { 'x-amzn-errortype': type, 'content-type': 'application/x-amz-json-1.1' },
  body: { __type: type, message },
});

export async function startAwsFake(): Promise<AwsFake> {
  const secrets = new Map<string, AwsFakeSecret>();
  let clock = 1_767_225_600; // 2026-01-01, seconds (the protocol sends epoch seconds)
  const now = (): number => ++clock;
  const fake = {} as AwsFake;
  const ok = (body: unknown): Reply => ({
    status: 200,
    headers: { 'content-type': 'application/x-amz-json-1.1' },
    body,
  });
  const find = (id: unknown): AwsFakeSecret | undefined => {
    if (typeof id !== 'string') return undefined;
    return secrets.get(id) ?? [...secrets.values()].find((s) => s.arn === id);
  };
  const current = (s: AwsFakeSecret): AwsFakeVersion | undefined =>
    s.versions.find((v) => v.stages.includes('AWSCURRENT'));
  const describe = (s: AwsFakeSecret): Record<string, unknown> => ({
    ARN: s.arn,
    Name: s.name,
    ...(s.description ? { Description: s.description } : {}),
    ...(s.kmsKeyId ? { KmsKeyId: s.kmsKeyId } : {}),
    CreatedDate: s.created,
    LastChangedDate: s.changed,
    ...(s.deletedDate ? { DeletedDate: s.deletedDate } : {}),
    Tags: [...s.tags].map(([Key, Value]) => ({ Key, Value })),
    VersionIdsToStages: Object.fromEntries(s.versions.map((v) => [v.token, v.stages])),
  });
  const addVersion = (s: AwsFakeSecret, token: string, value: string): void => {
    for (const v of s.versions) {
      if (v.stages.includes('AWSCURRENT')) v.stages = ['AWSPREVIOUS'];
      else v.stages = v.stages.filter((x) => x !== 'AWSPREVIOUS');
    }
    s.versions.push({ token, value, stages: ['AWSCURRENT'], created: now() });
    s.changed = now();
  };

  const handler = (r: RecordedRequest): Reply => {
    const target = String(r.headers['x-amz-target'] ?? '');
    if (r.method !== 'POST' || r.path !== '/' || !target.startsWith('secretsmanager.'))
      return err('UnknownOperationException', 'unknown operation', 404);
    if (!String(r.headers['content-type']).startsWith('application/x-amz-json-1.1'))
      return err('SerializationException', 'bad content type');
    if (
      !/^AWS4-HMAC-SHA256 Credential=[^/]+\/\d{8}\/[a-z0-9-]+\/secretsmanager\/aws4_request, SignedHeaders=[^,]+, Signature=[0-9a-f]{64}$/.test(
        String(r.headers.authorization),
      )
    ) {
      return err('IncompleteSignature', 'missing or malformed SigV4 authorization', 403);
    }
    const body = JSON.parse(r.body || '{}') as Record<string, unknown>;
    if (fake.denied.has(target))
      return err(
        'AccessDeniedException',
        `User: arn:aws:iam::123456789012:user/test is not authorized to perform: ${target.replace('.', ':')}`,
      );
    const injected = fake.fault?.(target, body);
    if (injected) return injected;
    const op = target.slice('secretsmanager.'.length);
    switch (op) {
      case 'CreateSecret': {
        const name = body.Name as string;
        const token = body.ClientRequestToken as string;
        if (!/^[A-Za-z0-9/_+=.@-]{1,512}$/.test(name)) return err('ValidationException', 'invalid name');
        if (typeof token !== 'string' || token.length < 32 || token.length > 64)
          return err('ValidationException', 'invalid ClientRequestToken');
        const badCreateTags = badTags(body.Tags);
        if (badCreateTags) return err('ValidationException', badCreateTags);
        const existing = secrets.get(name);
        if (existing?.deletedDate)
          return err(
            'InvalidRequestException',
            "You can't create this secret because a secret with this name is already scheduled for deletion.",
          );
        if (existing) {
          const v = existing.versions.find((x) => x.token === token);
          if (v && v.value === body.SecretString) return ok({ ARN: existing.arn, Name: name, VersionId: token });
          return err('ResourceExistsException', `The operation failed because the secret ${name} already exists.`);
        }
        const t = now();
        const s: AwsFakeSecret = {
          name,
          arn: `arn:aws:secretsmanager:us-east-1:123456789012:secret:${name}-${randomUUID().slice(0, 6)}`,
          versions: [],
          tags: new Map(
            ((body.Tags as { Key: string; Value: string }[] | undefined) ?? []).map((x) => [x.Key, x.Value]),
          ),
          created: t,
          changed: t,
          ...(typeof body.Description === 'string' ? { description: body.Description } : {}),
          ...(typeof body.KmsKeyId === 'string' ? { kmsKeyId: body.KmsKeyId } : {}),
        };
        secrets.set(name, s);
        addVersion(s, token, body.SecretString as string);
        return ok({ ARN: s.arn, Name: name, VersionId: token });
      }
      case 'PutSecretValue': {
        const s = find(body.SecretId);
        if (!s) return err('ResourceNotFoundException', "Secrets Manager can't find the specified secret.");
        if (s.deletedDate)
          return err(
            'InvalidRequestException',
            "You can't perform this operation on the secret because it was marked for deletion.",
          );
        const token = body.ClientRequestToken as string;
        const v = s.versions.find((x) => x.token === token);
        if (v) {
          if (v.value === body.SecretString)
            return ok({ ARN: s.arn, Name: s.name, VersionId: token, VersionStages: v.stages });
          return err(
            'ResourceExistsException',
            'A version with this ClientRequestToken already exists with different content.',
          );
        }
        addVersion(s, token, body.SecretString as string);
        return ok({ ARN: s.arn, Name: s.name, VersionId: token, VersionStages: ['AWSCURRENT'] });
      }
      case 'TagResource': {
        const s = find(body.SecretId);
        if (!s) return err('ResourceNotFoundException', "Secrets Manager can't find the specified secret.");
        const bad = badTags(body.Tags);
        if (bad) return err('ValidationException', bad);
        for (const t of body.Tags as { Key: string; Value: string }[]) s.tags.set(t.Key, t.Value);
        return ok({});
      }
      case 'DescribeSecret': {
        const s = find(body.SecretId);
        if (!s) return err('ResourceNotFoundException', "Secrets Manager can't find the specified secret.");
        return ok(describe(s));
      }
      case 'GetSecretValue': {
        const s = find(body.SecretId);
        if (!s) return err('ResourceNotFoundException', "Secrets Manager can't find the specified secret.");
        if (s.deletedDate)
          return err(
            'InvalidRequestException',
            "You can't perform this operation on the secret because it was marked for deletion.",
          );
        const v = current(s);
        if (!v)
          return err(
            'ResourceNotFoundException',
            "Secrets Manager can't find the specified secret value for staging label: AWSCURRENT",
          );
        return ok({
          ARN: s.arn,
          Name: s.name,
          VersionId: v.token,
          SecretString: v.value,
          VersionStages: v.stages,
          CreatedDate: v.created,
        });
      }
      case 'ListSecrets': {
        const filters = (body.Filters as { Key: string; Values: string[] }[] | undefined) ?? [];
        let list = [...secrets.values()].filter((s) => body.IncludePlannedDeletion === true || !s.deletedDate);
        for (const f of filters) {
          if (f.Key !== 'name') return err('ValidationException', `unsupported filter key in the fake: ${f.Key}`);
          list = list.filter((s) => f.Values.some((v) => s.name.toLowerCase().startsWith(v.toLowerCase())));
        }
        list.sort((a, b) => (a.name < b.name ? -1 : 1));
        const size = Math.min(Number(body.MaxResults ?? 100), fake.listPageSize);
        const start = typeof body.NextToken === 'string' ? Number(body.NextToken) : 0;
        const page = list.slice(start, start + size);
        const next = start + size < list.length ? String(start + size) : undefined;
        return ok({ SecretList: page.map(describe), ...(next ? { NextToken: next } : {}) });
      }
      case 'RestoreSecret': {
        const s = find(body.SecretId);
        if (!s) return err('ResourceNotFoundException', "Secrets Manager can't find the specified secret.");
        delete s.deletedDate;
        return ok({ ARN: s.arn, Name: s.name });
      }
      case 'DeleteSecret': {
        const s = find(body.SecretId);
        if (!s) return err('ResourceNotFoundException', "Secrets Manager can't find the specified secret.");
        if (body.ForceDeleteWithoutRecovery === true) secrets.delete(s.name);
        else s.deletedDate = now();
        return ok({ ARN: s.arn, Name: s.name, DeletionDate: now() });
      }
      default:
        return err('UnknownOperationException', `the fake does not implement ${op}`);
    }
  };
  const server = await startFake(handler);
  Object.assign(fake, server, {
    secrets,
    fault: undefined,
    denied: new Set<string>(),
    listPageSize: 100,
    ops: () => server.requests.map((r) => String(r.headers['x-amz-target'] ?? '').replace('secretsmanager.', '')),
    bodies: (op: string) =>
      server.requests
        .filter((r) => r.headers['x-amz-target'] === `secretsmanager.${op}`)
        .map((r) => JSON.parse(r.body || '{}') as Record<string, unknown>),
  });
  return fake;
}
