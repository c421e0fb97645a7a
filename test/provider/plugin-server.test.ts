// The provider process as Terraform meets it: cookie, version negotiation, handshake line,
// mutual TLS, schema, validation diagnostics with attribute paths, configuration, plans, state
// upgrade, stop and shutdown. No service is needed for any of this.
import * as grpc from '@grpc/grpc-js';
import { execFile } from 'node:child_process';
import { createHash, X509Certificate } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { makeServerCertificate } from '../../src/provider/plugin/certificate.js';
import { loadProtocol } from '../../src/provider/plugin/protocol.js';
import { createProvider } from '../../src/provider/provider.js';
import {
  ENCODED_METHODS,
  parseSchemaWire,
  readSchemaWire,
  SCHEMA_WIRE_PATH,
  wireSourcesDigest,
} from '../../src/provider/schema-wire.js';
import { repoRoot } from '../support/cli.js';
import { scratchDir } from '../support/scratch.js';
import {
  COOKIE,
  dyn,
  errors,
  isUnknownWire,
  mp,
  PROVIDER_BIN,
  startProvider,
  stepsOf,
  unmp,
  UNKNOWN,
  type ProviderProcess,
} from './harness.js';

const schemaDoc = JSON.parse(readFileSync(path.join(repoRoot, 'schemas', 'terraform-provider-kms.json'), 'utf8'));
const jsonSchema = Object.values(schemaDoc.provider_schemas)[0] as any;

function run(env: NodeJS.ProcessEnv): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [PROVIDER_BIN], { env: { PATH: process.env.PATH, ...env } }, (e, stdout, stderr) =>
      resolve({ code: e ? Number((e as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

/** A full object of a resource type: every attribute null except those given. */
function obj(type: string, values: Record<string, unknown>): Record<string, unknown> {
  const attrs = Object.keys(jsonSchema.resource_schemas[type].block.attributes);
  return Object.fromEntries(attrs.map((a) => [a, values[a] ?? null]));
}

describe('terraform-provider-kms process', () => {
  it('refuses to run by hand with a human message and prints nothing on stdout', async () => {
    const r = await run({});
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/not meant to be run by hand/);
    expect(r.stderr).toMatch(/Terraform provider/);
  });

  it('refuses a host that does not offer protocol 6', async () => {
    const r = await run({ ...COOKIE, PLUGIN_PROTOCOL_VERSIONS: '4,5' });
    expect(r.code).toBe(1);
    expect(r.stdout).toBe('');
    expect(r.stderr).toMatch(/plugin protocol 6.*host offers 4,5/);
  });
});

describe('a provider started like Terraform starts it', () => {
  let p: ProviderProcess;
  beforeAll(async () => {
    p = await startProvider({ env: { KMS_API_URL: 'http://127.0.0.1:9/api/v1', KMS_API_KEY: 'sk_test_unused' } });
  });
  afterAll(() => p?.kill());

  it('prints one go-plugin handshake line with its certificate for localhost', () => {
    const h = p.handshake;
    expect([h.core, h.version, h.network, h.protocol]).toEqual([1, 6, 'tcp', 'grpc']);
    expect(h.address).toMatch(/^127\.0\.0\.1:\d+$/);
    const cert = new X509Certificate(h.certDer);
    expect(cert.subjectAltName).toBe('DNS:localhost');
    expect(cert.verify(cert.publicKey)).toBe(true);
    expect(new Date(cert.validTo).getTime()).toBeGreaterThan(Date.now());
  });

  it('makes a certificate OpenSSL accepts on every start (positive, minimally encoded serial)', () => {
    // A serial whose first byte was 00 was a non-minimal INTEGER ("illegal padding"): one
    // provider start in ~256 failed. Half of all random serials hit the old range, so 200 find it.
    for (let i = 0; i < 200; i++) {
      const c = makeServerCertificate();
      const cert = new X509Certificate(c.der);
      expect(cert.serialNumber).toMatch(/^[4-7][0-9A-F]{31}$/);
    }
  });

  it('accepts only the client certificate it was given', async () => {
    const stranger = makeServerCertificate();
    const serverPem = `-----BEGIN CERTIFICATE-----\n${p.handshake.certDer.toString('base64')}\n-----END CERTIFICATE-----\n`;
    const creds = grpc.credentials.createSsl(
      Buffer.from(serverPem),
      Buffer.from(stranger.keyPem),
      Buffer.from(stranger.certPem),
    );
    const Client = grpc.makeGenericClientConstructor(loadProtocol().provider, 'Provider');
    const c = new Client(p.handshake.address, creds, { 'grpc.ssl_target_name_override': 'localhost' }) as any;
    const err = await new Promise<grpc.ServiceError | null>((resolve) =>
      c.GetMetadata({}, { deadline: Date.now() + 5000 }, (e: grpc.ServiceError | null) => resolve(e)),
    );
    c.close();
    expect(err?.code).toBe(grpc.status.UNAVAILABLE);
  });

  it('answers GetProviderSchema from schemas/terraform-provider-kms.json', async () => {
    const res = await p.call('GetProviderSchema');
    expect(errors(res.diagnostics)).toEqual([]);
    expect(Object.keys(res.resource_schemas).sort()).toEqual(Object.keys(jsonSchema.resource_schemas).sort());
    expect(Object.keys(res.data_source_schemas).sort()).toEqual(Object.keys(jsonSchema.data_source_schemas).sort());
    const apiKey = res.provider.block.attributes.find((a: any) => a.name === 'api_key');
    expect(apiKey.sensitive).toBe(true);
    expect(res.provider.block.block_types[0]).toMatchObject({ type_name: 'secret_store', nesting: 'LIST' });
    const ips = res.resource_schemas.kms_client.block.attributes.find((a: any) => a.name === 'ip_whitelist');
    expect(JSON.parse(ips.type.toString())).toEqual(['set', 'string']);
    expect(res.server_capabilities.plan_destroy).toBe(true);
    const meta = await p.call('GetMetadata');
    expect(meta.resources.map((r: any) => r.type_name).sort()).toEqual(Object.keys(jsonSchema.resource_schemas).sort());
    // Terraform then reuses the schema it read at the command's first provider start instead of asking again.
    expect(meta.server_capabilities.get_provider_schema_optional).toBe(true);
  });

  it('points validation diagnostics at the attribute', async () => {
    const bad = await p.call('ValidateResourceConfig', {
      type_name: 'kms_endpoint',
      config: mp(
        obj('kms_endpoint', { project_env: 'acme-production', method: 'FETCH', path: 'v1/orders', metadata: dyn('x') }),
      ),
    });
    const byAttr = Object.fromEntries(errors(bad.diagnostics).map((d) => [String(stepsOf(d)[0]), d.summary]));
    expect(byAttr).toEqual({ method: 'Invalid method', path: 'Invalid path', metadata: 'Invalid metadata' });
    const good = await p.call('ValidateResourceConfig', {
      type_name: 'kms_endpoint',
      config: mp(obj('kms_endpoint', { project_env: UNKNOWN, method: 'get', path: '/v1/orders' })),
    });
    expect(good.diagnostics).toEqual([]);
    const key = await p.call('ValidateResourceConfig', {
      type_name: 'kms_key',
      config: mp(obj('kms_key', { ttl: '90d', expires_at: '2030-01-01', name: 'k' })),
    });
    expect(errors(key.diagnostics).map((d) => [d.summary, stepsOf(d)])).toEqual([
      ['Conflicting expiry', ['expires_at']],
    ]);
    const stores = await p.call('ValidateProviderConfig', {
      config: mp({
        url: null,
        api_key: null,
        owner: null,
        base_dir: null,
        secret_store: dyn([
          { name: 'a', uri: 'nope', default: true, options: null },
          { name: 'a', uri: 'file:x', default: true, options: null },
        ]),
      }),
    });
    expect(errors(stores.diagnostics).map((d) => stepsOf(d))).toEqual([
      ['secret_store', 0, 'uri'],
      ['secret_store', 1, 'name'],
      ['secret_store', 1, 'default'],
    ]);
  });

  it('plans a create with computed values unknown and identity-derived ids known', async () => {
    const proposed = obj('kms_client', { project_env: 'acme-production', name: 'globex', template: 'gold' });
    const res = await p.call('PlanResourceChange', {
      type_name: 'kms_client',
      prior_state: mp(null),
      proposed_new_state: mp(proposed),
      config: mp(proposed),
    });
    expect(errors(res.diagnostics)).toEqual([]);
    const planned = unmp(res.planned_state);
    expect(planned.id).toBe('acme-production/globex');
    expect(isUnknownWire(planned.client_uuid)).toBe(true);
    expect(isUnknownWire(planned.type)).toBe(true); // optional + computed, not configured
    expect(planned.template).toBe('gold');
  });

  it('plans a replacement where the service cannot update in place', async () => {
    const prior = obj('kms_endpoint', {
      id: 'acme-production/GET:/v1/orders',
      project_env: 'acme-production',
      method: 'GET',
      path: '/v1/orders',
      name: 'List',
      request: dyn({ q: 'string' }),
      method_path: 'GET:/v1/orders',
      updated_at: '2026-01-01T00:00:00.000Z',
    });
    const renamed = { ...prior, name: 'List orders' };
    const inPlace = await p.call('PlanResourceChange', {
      type_name: 'kms_endpoint',
      prior_state: mp(prior),
      proposed_new_state: mp(renamed),
      config: mp(renamed),
    });
    expect(inPlace.requires_replace).toEqual([]);
    expect(isUnknownWire(unmp(inPlace.planned_state).updated_at)).toBe(true);
    const reshaped = { ...prior, request: dyn({ q: 'number' }) };
    const replace = await p.call('PlanResourceChange', {
      type_name: 'kms_endpoint',
      prior_state: mp(prior),
      proposed_new_state: mp(reshaped),
      config: mp(reshaped),
    });
    expect(replace.requires_replace.map((a: any) => a.steps.map((s: any) => s.attribute_name))).toEqual([['request']]);
    const same = await p.call('PlanResourceChange', {
      type_name: 'kms_endpoint',
      prior_state: mp(prior),
      proposed_new_state: mp(prior),
      config: mp(prior),
    });
    expect(unmp(same.planned_state)).toEqual({ ...prior, request: dyn({ q: 'string' }), timeouts: null });
    const guarded = { ...prior, protected: true };
    const destroy = await p.call('PlanResourceChange', {
      type_name: 'kms_endpoint',
      prior_state: mp(guarded),
      proposed_new_state: mp(null),
      config: mp(null),
    });
    expect(errors(destroy.diagnostics).map((d) => [d.summary, stepsOf(d)])).toEqual([
      ['Protected resource', ['protected']],
    ]);
  });

  it('upgrades JSON state, dropping attributes the schema no longer has', async () => {
    const raw = { id: 'acme', slug: 'acme', name: 'Acme', retired_attribute: 1 };
    const res = await p.call('UpgradeResourceState', {
      type_name: 'kms_project',
      version: 0,
      raw_state: { json: Buffer.from(JSON.stringify(raw)) },
    });
    expect(errors(res.diagnostics)).toEqual([]);
    expect(unmp(res.upgraded_state)).toEqual({
      id: 'acme',
      slug: 'acme',
      name: 'Acme',
      description: null,
      protected: null,
      timeouts: null,
    });
    const newer = await p.call('UpgradeResourceState', {
      type_name: 'kms_project',
      version: 7,
      raw_state: { json: Buffer.from('{}') },
    });
    expect(errors(newer.diagnostics)[0]?.summary).toBe('State written by a newer provider');
  });

  it('hands a state of the current schema back as the same JSON, and converts any other', async () => {
    // Exactly today's type (every attribute, dynamic values as {value,type}, the timeouts block):
    // Terraform reads the same bytes back, nothing is converted.
    const exact: Record<string, unknown> = {
      ...obj('kms_client', {
        id: 'acme-production/globex',
        project_env: 'acme-production',
        name: 'globex',
        template: 'std',
        ip_whitelist: ['10.0.0.0/8'],
        metadata: { value: { team: 'x' }, type: ['object', { team: 'string' }] },
        client_uuid: 'c-1',
      }),
      timeouts: null,
    };
    const bytes = Buffer.from(JSON.stringify(exact));
    const same = await p.call('UpgradeResourceState', {
      type_name: 'kms_client',
      version: 0,
      raw_state: { json: bytes },
    });
    expect(errors(same.diagnostics)).toEqual([]);
    expect(same.upgraded_state.msgpack.length).toBe(0);
    expect(Buffer.compare(same.upgraded_state.json, bytes)).toBe(0);
    // A missing attribute is converted as before (it starts null); a value of the wrong type is
    // still reported, not handed back.
    const { client_uuid: _gone, ...missing } = exact;
    const converted = await p.call('UpgradeResourceState', {
      type_name: 'kms_client',
      version: 0,
      raw_state: { json: Buffer.from(JSON.stringify(missing)) },
    });
    expect(errors(converted.diagnostics)).toEqual([]);
    expect(converted.upgraded_state.json.length).toBe(0);
    expect(unmp(converted.upgraded_state)).toMatchObject({ name: 'globex', client_uuid: null });
    for (const raw of [
      { ...exact, metadata: { value: { team: 1 }, type: ['object', { team: 'string' }] } },
      { ...exact, ip_whitelist: 'not-a-set' },
    ]) {
      const res = await p.call('UpgradeResourceState', {
        type_name: 'kms_client',
        version: 0,
        raw_state: { json: Buffer.from(JSON.stringify(raw)) },
      });
      expect(errors(res.diagnostics).length).toBe(1);
      expect(res.upgraded_state).toBeNull();
    }
  });

  it('answers a method it does not know with UNIMPLEMENTED, and keeps serving', async () => {
    const e = await p.rawCall('/tfplugin6.Provider/NoSuchMethod');
    expect(e?.code).toBe(grpc.status.UNIMPLEMENTED);
    const garbage = await p.rawCall('/tfplugin6.Provider/GetMetadata', Buffer.from([0xff, 0xff, 0xff]));
    expect(garbage?.code).toBe(grpc.status.INTERNAL);
    expect((await p.call('GetMetadata')).resources.length).toBeGreaterThan(0);
  });

  it('configures from the environment and reports a missing URL at the attribute', async () => {
    const empty = { url: null, api_key: null, owner: null, base_dir: null, secret_store: dyn([]) };
    expect(
      errors((await p.call('ConfigureProvider', { terraform_version: '1.11.4', config: mp(empty) })).diagnostics),
    ).toEqual([]);
    const q = await startProvider({ env: { KMS_API_KEY: 'sk_test_x' } });
    try {
      const res = await q.call('ConfigureProvider', { terraform_version: '1.11.4', config: mp(empty) });
      expect(errors(res.diagnostics).map((d) => [d.summary, stepsOf(d)])).toEqual([['Missing service URL', ['url']]]);
      // Unconfigured, a read says why instead of failing obscurely.
      const read = await q.call('ReadResource', {
        type_name: 'kms_project',
        current_state: mp(obj('kms_project', { id: 'a', slug: 'a', name: 'A' })),
      });
      expect(errors(read.diagnostics)[0]).toMatchObject({ summary: 'Provider not configured' });
      expect(errors(read.diagnostics)[0]!.detail).toMatch(/KMS_API_URL/);
    } finally {
      q.kill();
    }
  });

  it('is also served by `kms-sync provider`', async () => {
    const q = await startProvider({
      command: [process.execPath, path.join(repoRoot, 'dist', 'bin', 'kms-sync.js'), 'provider'],
    });
    expect(q.handshake.version).toBe(6);
    expect((await q.call('GetMetadata')).resources.length).toBe(Object.keys(jsonSchema.resource_schemas).length);
    // A message with fields: the protocol's codecs load there too (the schema's answers are encoded by the build).
    const config = {
      url: 'not a url',
      api_key: null,
      owner: null,
      base_dir: null,
      take_ownership: null,
      secret_store: dyn([]),
    };
    const validated = await q.call('ValidateProviderConfig', { config: mp(config) });
    expect(errors(validated.diagnostics).map((d) => stepsOf(d))).toEqual([['url']]);
    expect(await q.shutdown()).toBe(0);
  });

  it('stops gracefully and exits 0 on GRPCController.Shutdown', async () => {
    const q = await startProvider();
    expect(await q.call('StopProvider')).toEqual({ Error: '' });
    expect(await q.shutdown()).toBe(0);
  });
});

describe('the schema answers encoded by the build (dist/provider/schema-wire.json)', () => {
  it('are byte for byte what the provider encodes itself', async () => {
    const wire = readSchemaWire();
    expect(wire, 'dist/provider/schema-wire.json is missing or stale: npm run build').toBeDefined();
    const service = loadProtocol().provider;
    const provider = createProvider({ env: {} });
    for (const m of ENCODED_METHODS) {
      const own = service[m]!.responseSerialize(await provider[m]!({}));
      expect(wire![m]?.equals(own), `${m}: the encoded answer is the provider's own`).toBe(true);
    }
  });

  it('are not used once the schema or protocol files differ from those they were encoded from', () => {
    const text = readFileSync(path.join(repoRoot, ...SCHEMA_WIRE_PATH), 'utf8');
    expect(Object.keys(parseSchemaWire(text, wireSourcesDigest()) ?? {}).sort()).toEqual([...ENCODED_METHODS].sort());
    expect(parseSchemaWire(text, createHash('sha256').update('another schema').digest('hex'))).toBeUndefined();
  });

  it('answer a start asked only for the schema without loading the provider implementation', async () => {
    // Every module a provider process resolves; a chunk of dist/provider-bin/ stands for the modules it holds.
    const binDir = path.dirname(PROVIDER_BIN);
    const chunks = JSON.parse(readFileSync(path.join(binDir, 'modules.json'), 'utf8')) as Record<string, string[]>;
    const tracer = path.join(repoRoot, 'test', 'bench', 'fixtures', 'trace-imports.mjs');
    const modulesOf = async (calls: (q: ProviderProcess) => Promise<void>) => {
      const trace = path.join(scratchDir('kms-sync-provider-imports-'), 'modules.txt');
      const q = await startProvider({
        command: [process.execPath, '--import', tracer, PROVIDER_BIN],
        env: { KMS_SYNC_TRACE_IMPORTS: trace },
      });
      await calls(q);
      expect(await q.shutdown()).toBe(0);
      return readFileSync(trace, 'utf8')
        .split('\n')
        .filter((u) => u.startsWith('file:') && path.dirname(fileURLToPath(u)) === binDir)
        .flatMap((u) => chunks[path.basename(fileURLToPath(u))] ?? [`${u} (not in modules.json: npm run build)`]);
    };
    const schemaOnly = await modulesOf(async (q) => {
      const schema = await q.call('GetProviderSchema');
      expect(Object.keys(schema.resource_schemas).sort()).toEqual(Object.keys(jsonSchema.resource_schemas).sort());
      expect((await q.call('GetMetadata')).server_capabilities.get_provider_schema_optional).toBe(true);
    });
    expect(schemaOnly).toContain('dist/provider/plugin/serve.js');
    expect(schemaOnly).not.toContain('dist/provider/provider.js');
    // The trace sees the implementation when a call needs it.
    const validating = await modulesOf(async (q) => {
      const empty = {
        url: null,
        api_key: null,
        owner: null,
        base_dir: null,
        take_ownership: null,
        secret_store: dyn([]),
      };
      expect(errors((await q.call('ValidateProviderConfig', { config: mp(empty) })).diagnostics)).toEqual([]);
    });
    expect(validating).toContain('dist/provider/provider.js');
  });
});
