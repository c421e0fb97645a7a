// The contract document itself: valid OpenAPI 3.0, complete, and explicit about errors and auth.
import { validate, compileErrors } from '@readme/openapi-parser';
import { describe, expect, it } from 'vitest';
import {
  assertMatchesContract,
  contract,
  documentedResponse,
  getOperation,
  listOperations,
  loadContract,
  matchPathTemplate,
  toJsonSchema,
  type OperationObject,
} from '../support/contract.js';

/** Every operation of interface section 4, plus the extra ones from docs/contract-decisions.md. */
const INTERFACE_OPERATIONS: Array<[string, string]> = [
  // 4.1 projects
  ['GET', '/project'],
  ['POST', '/project'],
  ['GET', '/project/{project_env}'],
  ['PUT', '/project/{project_env}'],
  ['DELETE', '/project/{project_env}'],
  ['GET', '/project/{project_env}/logs'],
  // 4.2 clients (+ 4.3 validation)
  ['GET', '/client'],
  ['POST', '/client'],
  ['GET', '/client/{client_uuid}'],
  ['PUT', '/client/{client_uuid}'],
  ['DELETE', '/client/{client_uuid}'],
  ['POST', '/client/{client_uuid}'],
  ['GET', '/client/templates'],
  // 4.4 endpoints
  ['GET', '/endpoint'],
  ['POST', '/endpoint'],
  ['GET', '/endpoint/{method_path}'],
  ['PUT', '/endpoint/{method_path}'],
  ['DELETE', '/endpoint/{method_path}'],
];
const EXTRA_OPERATIONS: Array<[string, string]> = [
  ['GET', '/openapi.yaml'],
  ['GET', '/openapi.json'],
  ['GET', '/encryption-key'],
];
const UNAUTHENTICATED = new Set(['GET /openapi.yaml', 'GET /openapi.json']);

/** Query parameters the interface names per operation (section 4). */
const QUERY_PARAMS: Record<string, string[]> = {
  'GET /project': ['page', 'limit', 'name', 'status'],
  'DELETE /project/{project_env}': ['kind', 'envId', 'templateId', 'forceDelete'],
  'GET /project/{project_env}/logs': ['methodPath', 'clientId', 'status', 'page', 'limit'],
  'GET /client': ['project_env', 'name', 'type', 'templateId', 'page', 'limit'],
  'POST /client': ['project_env'],
  'GET /client/{client_uuid}': ['project_env'],
  'PUT /client/{client_uuid}': ['project_env'],
  'DELETE /client/{client_uuid}': ['keyId'],
  'POST /client/{client_uuid}': ['project_env', 'method_path'],
  'GET /client/templates': ['project_env'],
  'GET /endpoint': ['project_env', 'page', 'limit'],
  'POST /endpoint': ['project_env'],
  'GET /endpoint/{method_path}': ['project_env'],
  'PUT /endpoint/{method_path}': ['project_env'],
  'DELETE /endpoint/{method_path}': ['project_env'],
};

/** Conflicts the decisions define (409). */
const CONFLICT_OPERATIONS = [
  'POST /project', // duplicate slug / template name
  'PUT /project/{project_env}', // template rename clash
  'DELETE /project/{project_env}', // RESOURCE_IN_USE
  'POST /client', // CLIENT_LIMIT_REACHED
  'PUT /client/{client_uuid}', // CLIENT_LIMIT_REACHED on template move
  'POST /endpoint', // duplicate method_path
];

interface Param {
  name: string;
  in: string;
  required?: boolean;
  schema?: Record<string, unknown>;
  $ref?: string;
}

function params(path: string, op: OperationObject): Param[] {
  const item = contract.paths[path] as Record<string, unknown>;
  const all = [...((item.parameters as Param[] | undefined) ?? []), ...((op.parameters as Param[] | undefined) ?? [])];
  return all.map((p) => {
    if (!p.$ref) return p;
    const name = p.$ref.replace('#/components/parameters/', '');
    const target = contract.components.parameters[name] as unknown as Param | undefined;
    if (!target) throw new Error(`unresolved ${p.$ref}`);
    return target;
  });
}

function errorSchemaOf(method: string, path: string, status: number): unknown {
  const { response } = documentedResponse(method, path, status);
  return response.content?.['application/json']?.schema;
}

const ALL = [...INTERFACE_OPERATIONS, ...EXTRA_OPERATIONS];
const AUTHENTICATED = ALL.filter(([m, p]) => !UNAUTHENTICATED.has(`${m} ${p}`));

describe('OpenAPI document', () => {
  it('is a valid OpenAPI 3.0.3 document (@readme/openapi-parser)', async () => {
    const result = await validate(loadContract() as never);
    expect(result.valid, result.valid ? '' : compileErrors(result)).toBe(true);
    expect(result.specification).toBe('OpenAPI');
    expect(contract.openapi).toBe('3.0.3');
    expect(contract.servers).toEqual([expect.objectContaining({ url: '/api/v1' })]);
  });

  it('rejects an invalid document (the validator is really checking)', async () => {
    const broken = loadContract();
    (broken.paths['/project'] as Record<string, unknown>).get = { responses: 'nope' };
    const result = await validate(broken as never);
    expect(result.valid).toBe(false);
  });

  it('contains every operation of interface section 4 and the extra operations, and nothing else', () => {
    for (const [m, p] of ALL) expect(getOperation(m, p), `${m} ${p}`).toBeDefined();
    const documented = listOperations()
      .map(([m, p]) => `${m} ${p}`)
      .sort();
    expect(documented).toEqual(ALL.map(([m, p]) => `${m} ${p}`).sort());
  });

  it('every operation has a unique operationId and a success response', () => {
    const ids = listOperations().map(([, , op]) => op.operationId);
    expect(ids.every((id) => typeof id === 'string' && id.length > 0)).toBe(true);
    expect(new Set(ids).size).toBe(ids.length);
    for (const [m, p, op] of listOperations()) {
      const success = Object.keys(op.responses).filter((s) => /^2\d\d$/.test(s));
      expect(success, `${m} ${p}`).toHaveLength(1);
    }
    expect(Object.keys(getOperation('POST', '/project')!.responses)).toContain('201');
    expect(Object.keys(getOperation('POST', '/client')!.responses)).toContain('201');
    expect(Object.keys(getOperation('POST', '/endpoint')!.responses)).toContain('201');
  });

  it('declares the interface query parameters with their types, defaults and bounds', () => {
    for (const [key, names] of Object.entries(QUERY_PARAMS)) {
      const [m, p] = key.split(' ') as [string, string];
      const declared = params(p, getOperation(m, p)!)
        .filter((x) => x.in === 'query')
        .map((x) => x.name);
      for (const n of names) expect(declared, `${key} ?${n}`).toContain(n);
    }
    const page = contract.components.parameters.Page as unknown as Param;
    const limit = contract.components.parameters.Limit as unknown as Param;
    expect(page.schema).toMatchObject({ type: 'integer', minimum: 1, default: 1 });
    expect(limit.schema).toMatchObject({ type: 'integer', minimum: 1, maximum: 100, default: 10 });
    // Every list operation pages.
    for (const key of [
      'GET /project',
      'GET /project/{project_env}/logs',
      'GET /client',
      'GET /client/templates',
      'GET /endpoint',
    ]) {
      const [m, p] = key.split(' ') as [string, string];
      const names = params(p, getOperation(m, p)!).map((x) => x.name);
      expect(names, key).toEqual(expect.arrayContaining(['page', 'limit']));
    }
    // project_env is required on client, template and endpoint operations (Choice), optional on DELETE client.
    for (const [m, p] of INTERFACE_OPERATIONS.filter(([, p]) => p.startsWith('/client') || p.startsWith('/endpoint'))) {
      const pe = params(p, getOperation(m, p)!).find((x) => x.name === 'project_env' && x.in === 'query');
      expect(pe, `${m} ${p}`).toBeDefined();
      expect(pe!.required, `${m} ${p}`).toBe(!(m === 'DELETE' && p === '/client/{client_uuid}'));
    }
    const kind = params('/project/{project_env}', getOperation('DELETE', '/project/{project_env}')!).find(
      (x) => x.name === 'kind',
    );
    expect(kind?.schema?.enum).toEqual(['project', 'env', 'template']);
  });

  it('declares auth: global apiKey (x-api-key) or bearer, docs unauthenticated', () => {
    const schemes = contract.components.securitySchemes;
    expect(schemes.ApiKeyHeader).toMatchObject({ type: 'apiKey', in: 'header', name: 'x-api-key' });
    expect(schemes.BearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
    expect(contract.security).toEqual([{ ApiKeyHeader: [] }, { BearerAuth: [] }]);
    for (const [m, p] of ALL) {
      const op = getOperation(m, p)!;
      if (UNAUTHENTICATED.has(`${m} ${p}`)) expect(op.security, `${m} ${p}`).toEqual([]);
      else expect(op.security === undefined || op.security.length > 0, `${m} ${p} must not opt out of auth`).toBe(true);
    }
  });

  it('every authenticated operation declares 401, 403, 429 and 5XX with the Error shape', () => {
    for (const [m, p] of AUTHENTICATED) {
      expect(getOperation(m, p)!.responses['5XX'], `${m} ${p} 5XX`).toBeDefined();
      for (const status of [401, 403, 429, 500, 503]) {
        expect(errorSchemaOf(m, p, status), `${m} ${p} ${status}`).toEqual({ $ref: '#/components/schemas/Error' });
      }
    }
  });

  it('operations with parameters or bodies declare 400; with bodies 413; with a resource 404; conflicts 409', () => {
    for (const [m, p] of AUTHENTICATED) {
      const op = getOperation(m, p)!;
      const hasQuery = params(p, op).some((x) => x.in === 'query');
      const hasPathParam = p.includes('{');
      const scoped = params(p, op).some((x) => x.name === 'project_env');
      if (hasQuery || op.requestBody) expect(errorSchemaOf(m, p, 400), `${m} ${p} 400`).toBeDefined();
      if (op.requestBody) expect(errorSchemaOf(m, p, 413), `${m} ${p} 413`).toBeDefined();
      else expect(op.responses['413'], `${m} ${p} has no body, so no 413`).toBeUndefined();
      if (hasPathParam || scoped) expect(errorSchemaOf(m, p, 404), `${m} ${p} 404`).toBeDefined();
      const key = `${m} ${p}`;
      if (CONFLICT_OPERATIONS.includes(key)) expect(errorSchemaOf(m, p, 409), `${key} 409`).toBeDefined();
      else expect(op.responses['409'], `${key} declares no conflict`).toBeUndefined();
    }
  });

  it('405 and unknown routes are documented as reusable responses', () => {
    expect(contract.components.responses.MethodNotAllowed?.headers?.Allow).toBeDefined();
    expect(documentedResponse('PATCH', '/project', 405).response).toBe(contract.components.responses.MethodNotAllowed);
    expect(documentedResponse('GET', '/no/such/route', 404).response).toBe(contract.components.responses.NotFound);
    expect(() => documentedResponse('PATCH', '/project', 400)).toThrow(/not documented/);
    expect(() => documentedResponse('GET', '/project', 418)).toThrow(/not documented/);
  });

  it('the daily-limit 429 requires Retry-After', () => {
    const { response } = documentedResponse('POST', '/client/{client_uuid}', 429);
    expect(response.headers?.['Retry-After']).toBeDefined();
    expect(() =>
      assertMatchesContract(
        'POST',
        '/client/{client_uuid}',
        429,
        { code: 'DAILY_LIMIT_EXCEEDED', status: 429, error: 'x' },
        {},
      ),
    ).toThrow(/Retry-After/);
  });

  it('has the named component schemas', () => {
    for (const name of [
      'ProjectSummary',
      'ProjectFull',
      'EnvSummary',
      'EnvFull',
      'Template',
      'Client',
      'ClientWithStats',
      'ClientCreated',
      'Key',
      'KeyWithSecret',
      'Endpoint',
      'LogEntry',
      'Pagination',
      'Error',
      'ValidationRequest',
      'EncryptedBody',
      'ValidationResult',
      'EncryptionKey',
      'DeleteResult',
      'ClientDeleteResult',
      'EndpointDeleteResult',
    ])
      expect(contract.components.schemas[name], name).toBeDefined();
    expect(contract.components.schemas.Error).toMatchObject({ required: ['code', 'status', 'error'] });
  });

  it('request bodies are closed (additionalProperties: false); response schemas stay open', () => {
    const schemas = contract.components.schemas;
    const requestSchemas = [
      'ProjectCreate',
      'ProjectUpdate',
      'EnvInput',
      'TemplateInput',
      'TemplateUpsert',
      'ClientCreate',
      'ClientUpdate',
      'KeyInput',
      'KeyUpsert',
      'EndpointCreate',
      'EndpointUpdate',
      'ValidationRequest',
      'EncryptedBody',
    ];
    for (const name of requestSchemas) expect(schemas[name]?.additionalProperties, name).toBe(false);
    const responseSchemas = [
      'ProjectSummary',
      'EnvSummary',
      'Template',
      'Client',
      'Key',
      'Endpoint',
      'LogEntry',
      'Pagination',
      'Error',
      'ValidationResult',
      'EncryptionKey',
      'DeleteResult',
      'ClientDeleteResult',
      'EndpointDeleteResult',
    ];
    for (const name of responseSchemas) expect(schemas[name]?.additionalProperties, name).toBeUndefined();
    // Request bodies of the operations use those closed schemas.
    const bodyRef = (m: string, p: string) =>
      JSON.stringify(
        (getOperation(m, p)!.requestBody as { content: Record<string, unknown> }).content['application/json'],
      );
    expect(bodyRef('POST', '/project')).toContain('ProjectCreate');
    expect(bodyRef('PUT', '/project/{project_env}')).toContain('ProjectUpdate');
    expect(bodyRef('POST', '/client')).toContain('ClientCreate');
    expect(bodyRef('PUT', '/client/{client_uuid}')).toContain('ClientUpdate');
    expect(bodyRef('POST', '/client/{client_uuid}')).toMatch(/ValidationRequest.*EncryptedBody/);
    expect(bodyRef('POST', '/endpoint')).toContain('EndpointCreate');
    expect(bodyRef('PUT', '/endpoint/{method_path}')).toContain('EndpointUpdate');
  });

  it('keys: raw key only in KeyWithSecret; expiresAt nullable', () => {
    const key = contract.components.schemas.Key as {
      properties: Record<string, Record<string, unknown>>;
      required: string[];
    };
    expect(key.properties.key).toBeUndefined();
    expect(key.properties.expiresAt).toMatchObject({ nullable: true, format: 'date-time' });
    expect(key.required).toContain('expiresAt');
    expect(JSON.stringify(contract.components.schemas.KeyWithSecret)).toContain('"required":["key"]');
    const base = {
      id: 'k',
      name: 'n',
      expiresAt: null,
      autoRotate: false,
      keyPrefix: 'kmsc_abcdefg',
      createdAt: '2024-01-01T00:00:00Z',
    };
    const client = {
      id: '0b8f6c1e-8f7a-4a43-9d3b-0c9c1f0c2d11',
      client_uuid: '0b8f6c1e-8f7a-4a43-9d3b-0c9c1f0c2d11',
      name: 'c',
      type: 'company',
      templateId: 't',
      ipWhitelist: [],
      metadata: {},
      project_env: 'a-production',
      createdAt: '2024-01-01T00:00:00Z',
      updatedAt: '2024-01-01T00:00:00Z',
      keys: [base],
    };
    // A created client must carry the raw key; a stored one may be null-expiring.
    expect(() => assertMatchesContract('POST', '/client', 201, client)).toThrow(/key/);
    expect(() =>
      assertMatchesContract('POST', '/client', 201, { ...client, keys: [{ ...base, key: `kmsc_${'A'.repeat(43)}` }] }),
    ).not.toThrow();
    expect(() => assertMatchesContract('PUT', '/client/{client_uuid}', 200, client)).not.toThrow();
    expect(() =>
      assertMatchesContract('PUT', '/client/{client_uuid}', 200, { ...client, keys: [{ ...base, expiresAt: 5 }] }),
    ).toThrow(/expiresAt/);
  });

  it('documents every "not shown" choice with a "Choice:" description', () => {
    const text = JSON.stringify(contract);
    const choices = text.match(/Choice:/g) ?? [];
    expect(choices.length).toBeGreaterThanOrEqual(25);
    const desc = (m: string, p: string) => getOperation(m, p)!.description ?? '';
    for (const [m, p] of [
      ['DELETE', '/client/{client_uuid}'],
      ['PUT', '/client/{client_uuid}'],
      ['POST', '/client/{client_uuid}'],
      ['PUT', '/project/{project_env}'],
      ['DELETE', '/project/{project_env}'],
      ['GET', '/client/templates'],
      ['GET', '/client'],
      ['POST', '/client'],
      ['POST', '/endpoint'],
      ['GET', '/encryption-key'],
    ] as const)
      expect(desc(m, p), `${m} ${p}`).toContain('Choice:');
    // The encryption scheme is documented in full, in the operation and in the schema.
    for (const text of [
      desc('POST', '/client/{client_uuid}'),
      String(contract.components.schemas.EncryptedBody?.description),
    ]) {
      for (const part of [
        'X25519',
        'HKDF-SHA256',
        'kms-validation-v1',
        'AES-256-GCM',
        'iv',
        'tag',
        'DECRYPTION_FAILED',
      ]) {
        expect(text, part).toContain(part);
      }
      expect(text).toMatch(/AAD.*v1/);
      expect(text).toMatch(/salt = epk/);
    }
  });

  it('path templates match concrete paths, literal segments first', () => {
    expect(matchPathTemplate('/client/templates')).toBe('/client/templates');
    expect(matchPathTemplate('/api/v1/client/templates?project_env=a-b')).toBe('/client/templates');
    expect(matchPathTemplate('/client/abc')).toBe('/client/{client_uuid}');
    expect(matchPathTemplate('/project/a-production/logs')).toBe('/project/{project_env}/logs');
    expect(matchPathTemplate('/project/a-production')).toBe('/project/{project_env}');
    expect(matchPathTemplate(`/endpoint/${encodeURIComponent('GET:/a/{id}')}`)).toBe('/endpoint/{method_path}');
    expect(matchPathTemplate('http://127.0.0.1:1/api/v1/openapi.json')).toBe('/openapi.json');
    expect(matchPathTemplate('/client/a/b')).toBeUndefined();
    expect(matchPathTemplate('/nothing')).toBeUndefined();
  });

  it('converts nullable to a null type', () => {
    expect(toJsonSchema({ type: 'string', nullable: true })).toEqual({ type: ['string', 'null'] });
    expect(toJsonSchema({ type: 'string', enum: ['a'], nullable: true })).toEqual({
      type: ['string', 'null'],
      enum: ['a', null],
    });
    expect(toJsonSchema({ $ref: '#/components/schemas/Key' })).toEqual({ $ref: 'kms-openapi#/definitions/Key' });
  });
});
