// Plays Terraform core against terraform-provider-kms, with no terraform binary: spawns the
// built provider with the magic cookie and a client certificate, reads the handshake line,
// connects over mutual TLS and calls the tfplugin6 RPCs. Values are built and read with plain
// MessagePack here (unknown = extension 0), not with the provider's own codec.
import * as grpc from '@grpc/grpc-js';
import { decode, encode, ExtData } from '@msgpack/msgpack';
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { makeServerCertificate } from '../../src/provider/plugin/certificate.js';
import { loadProtocol } from '../../src/provider/plugin/protocol.js';
import { repoRoot } from '../support/cli.js';

export const PROVIDER_BIN = path.join(repoRoot, 'dist', 'provider-bin', 'terraform-provider-kms.js');
export const COOKIE = { TF_PLUGIN_MAGIC_COOKIE: 'd602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2' };

/** An unknown value as Terraform sends it. */
export const UNKNOWN = new ExtData(0, new Uint8Array([0]));
export const isUnknownWire = (v: unknown) => v instanceof ExtData;

/** Terraform's type of a plain value, as HCL gives it (objects for objects, tuples for arrays). */
function typeOf(v: unknown): unknown {
  if (v === null) return 'dynamic';
  if (typeof v === 'string') return 'string';
  if (typeof v === 'number') return 'number';
  if (typeof v === 'boolean') return 'bool';
  if (Array.isArray(v)) return ['tuple', v.map(typeOf)];
  return ['object', Object.fromEntries(Object.entries(v as object).map(([k, x]) => [k, typeOf(x)]))];
}

/**
 * A value of a `dynamic` attribute on the wire: [type as JSON bytes, value]. Terraform sends a
 * list of blocks that hold a dynamic attribute (the provider's secret_store) the same way.
 */
export const dyn = (v: unknown) => (v === null ? null : [Buffer.from(JSON.stringify(typeOf(v))), v]);

export const mp = (value: unknown) => ({ msgpack: Buffer.from(encode(value)) });
export const unmp = (dv: { msgpack?: Buffer } | null | undefined): any =>
  dv?.msgpack?.length ? decode(dv.msgpack) : null;

export interface Handshake {
  core: number;
  version: number;
  network: string;
  address: string;
  protocol: string;
  certDer: Buffer;
}

export function parseHandshake(line: string): Handshake {
  const [core, version, network, address, protocol, cert] = line.trim().split('|');
  const b64 = cert ?? '';
  return {
    core: Number(core),
    version: Number(version),
    network: network!,
    address: address!,
    protocol: protocol!,
    certDer: Buffer.from(b64 + '='.repeat((4 - (b64.length % 4)) % 4), 'base64'),
  };
}

const pem = (der: Buffer) =>
  `-----BEGIN CERTIFICATE-----\n${der.toString('base64').replace(/.{1,64}/g, '$&\n')}-----END CERTIFICATE-----\n`;

export interface Diagnostic {
  severity: string;
  summary: string;
  detail: string;
  attribute?: { steps: Record<string, unknown>[] } | null;
}

export class ProviderProcess {
  stderr = '';
  readonly exited: Promise<number | null>;
  private readonly client: grpc.Client;
  private readonly controller: grpc.Client;

  readonly child: ChildProcess;
  readonly handshake: Handshake;

  constructor(child: ChildProcess, handshake: Handshake, clientCert: { certPem: string; keyPem: string }) {
    this.child = child;
    this.handshake = handshake;
    child.stderr!.on('data', (b: Buffer) => {
      this.stderr += b.toString();
    });
    this.exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
    const proto = loadProtocol();
    const creds = grpc.credentials.createSsl(
      Buffer.from(pem(handshake.certDer)),
      Buffer.from(clientCert.keyPem),
      Buffer.from(clientCert.certPem),
    );
    const options = {
      'grpc.ssl_target_name_override': 'localhost',
      'grpc.default_authority': 'localhost',
      'grpc.max_receive_message_length': 256 * 1024 * 1024,
    };
    this.client = new (grpc.makeGenericClientConstructor(proto.provider, 'Provider'))(
      handshake.address,
      creds,
      options,
    );
    this.controller = new (grpc.makeGenericClientConstructor(proto.controller, 'GRPCController'))(
      handshake.address,
      creds,
      options,
    );
  }

  /** One tfplugin6.Provider RPC. */
  call<T = any>(method: string, request: object = {}): Promise<T> {
    return new Promise((resolve, reject) => {
      (this.client as any)[method](request, (e: Error | null, res: T) => (e ? reject(e) : resolve(res)));
    });
  }

  /** A call by path with raw message bytes (a method the service may not have): the gRPC error, or null. */
  rawCall(methodPath: string, message: Buffer = Buffer.alloc(0)): Promise<grpc.ServiceError | null> {
    return new Promise((resolve) => {
      this.client.makeUnaryRequest(
        methodPath,
        (b: Buffer) => b,
        (b: Buffer) => b,
        message,
        (e: grpc.ServiceError | null) => resolve(e),
      );
    });
  }

  /** GRPCController.Shutdown, as Terraform ends a provider; resolves with the exit code. */
  async shutdown(): Promise<number | null> {
    await new Promise<void>((resolve, reject) =>
      (this.controller as any).Shutdown({}, (e: Error | null) => (e ? reject(e) : resolve())),
    );
    this.client.close();
    this.controller.close();
    return this.exited;
  }

  kill() {
    this.client.close();
    this.controller.close();
    this.child.kill('SIGKILL');
  }
}

export interface StartOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  /** Default: the built bin. */
  command?: string[];
}

/** Spawns the provider the way go-plugin does and connects to it. */
export async function startProvider(o: StartOptions = {}): Promise<ProviderProcess> {
  const clientCert = makeServerCertificate();
  const [cmd, ...args] = o.command ?? [process.execPath, PROVIDER_BIN];
  const child = spawn(cmd!, args, {
    cwd: o.cwd ?? repoRoot,
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      ...COOKIE,
      PLUGIN_PROTOCOL_VERSIONS: '5,6',
      PLUGIN_CLIENT_CERT: clientCert.certPem,
      ...o.env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const line = await firstLine(child);
  return new ProviderProcess(child, parseHandshake(line), clientCert);
}

export function firstLine(child: ChildProcess, timeoutMs = 20_000): Promise<string> {
  return new Promise((resolve, reject) => {
    let out = '';
    let err = '';
    const timer = setTimeout(() => reject(new Error(`no handshake within ${timeoutMs} ms; stderr: ${err}`)), timeoutMs);
    child.stderr!.on('data', (b: Buffer) => {
      err += b.toString();
    });
    child.stdout!.on('data', (b: Buffer) => {
      out += b.toString();
      const nl = out.indexOf('\n');
      if (nl >= 0) {
        clearTimeout(timer);
        resolve(out.slice(0, nl));
      }
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`provider exited (${code}) before the handshake; stderr: ${err}`));
    });
  });
}

/** The attribute path of a diagnostic as plain steps: names, indexes, map keys. */
export function stepsOf(d: Diagnostic): unknown[] {
  return (d.attribute?.steps ?? []).map((s) => s.attribute_name ?? s.element_key_int ?? s.element_key_string);
}

export const errors = (diags: Diagnostic[] | undefined) => (diags ?? []).filter((d) => d.severity === 'ERROR');

// ---------------------------------------------------------------- Terraform core's resource lifecycle
type Obj = Record<string, unknown>;

/** What core does around one resource, against a schema in `providers schema -json` form. */
export class Core {
  readonly p: ProviderProcess;
  readonly schema: { resource_schemas: Record<string, any>; data_source_schemas: Record<string, any> };

  constructor(p: ProviderProcess, schema: Core['schema']) {
    this.p = p;
    this.schema = schema;
  }

  /** Attributes and nested blocks (timeouts) of a resource: what a configuration object holds. */
  private attrs(type: string) {
    const block = this.schema.resource_schemas[type].block;
    return {
      ...block.attributes,
      ...Object.fromEntries(Object.keys(block.block_types ?? {}).map((k) => [k, { optional: true }])),
    } as Record<string, { computed?: boolean; optional?: boolean }>;
  }

  /** The configuration object: every attribute, null unless given. */
  config(type: string, values: Obj): Obj {
    return Object.fromEntries(Object.keys(this.attrs(type)).map((a) => [a, values[a] ?? null]));
  }

  /** Core's proposed new state: configured values, else (computed attributes) the prior ones. */
  proposed(type: string, prior: Obj | null, config: Obj): Obj {
    const attrs = this.attrs(type);
    return Object.fromEntries(
      Object.keys(attrs).map((a) => [a, config[a] ?? (attrs[a]!.computed && prior ? prior[a] : null) ?? null]),
    );
  }

  async validate(type: string, config: Obj): Promise<Diagnostic[]> {
    return (await this.p.call('ValidateResourceConfig', { type_name: type, config: mp(config) })).diagnostics;
  }

  async plan(type: string, prior: Obj | null, config: Obj | null) {
    const res = await this.p.call('PlanResourceChange', {
      type_name: type,
      prior_state: mp(prior),
      proposed_new_state: mp(config && this.proposed(type, prior, config)),
      config: mp(config),
    });
    return {
      planned: unmp(res.planned_state) as Obj | null,
      replace: (res.requires_replace ?? []).map((a: any) =>
        a.steps.map((s: any) => s.attribute_name).join('.'),
      ) as string[],
      diagnostics: res.diagnostics as Diagnostic[],
    };
  }

  async apply(type: string, prior: Obj | null, planned: Obj | null, config: Obj | null) {
    const res = await this.p.call('ApplyResourceChange', {
      type_name: type,
      prior_state: mp(prior),
      planned_state: mp(planned),
      config: mp(config),
    });
    return { state: unmp(res.new_state) as Obj | null, diagnostics: res.diagnostics as Diagnostic[] };
  }

  /** validate → plan → apply; throws on any error diagnostic. */
  async converge(type: string, prior: Obj | null, values: Obj | null): Promise<Obj | null> {
    const config = values && this.config(type, values);
    if (config) assertNoErrors(`validate ${type}`, await this.validate(type, config));
    const plan = await this.plan(type, prior, config);
    assertNoErrors(`plan ${type}`, plan.diagnostics);
    if (plan.replace.length && prior) {
      const gone = await this.apply(type, prior, null, null);
      assertNoErrors(`apply (destroy) ${type}`, gone.diagnostics);
      return this.converge(type, null, values);
    }
    const applied = await this.apply(type, prior, plan.planned, config);
    assertNoErrors(`apply ${type}`, applied.diagnostics);
    return applied.state;
  }

  async read(type: string, state: Obj): Promise<Obj | null> {
    const res = await this.p.call('ReadResource', { type_name: type, current_state: mp(state) });
    assertNoErrors(`read ${type}`, res.diagnostics);
    return unmp(res.new_state);
  }

  async importState(type: string, id: string) {
    const res = await this.p.call('ImportResourceState', { type_name: type, id });
    return {
      states: (res.imported_resources ?? []).map((r: any) => unmp(r.state)) as Obj[],
      diagnostics: res.diagnostics as Diagnostic[],
    };
  }

  async readData(type: string, values: Obj) {
    const attrs = Object.keys(this.schema.data_source_schemas[type].block.attributes);
    const res = await this.p.call('ReadDataSource', {
      type_name: type,
      config: mp(Object.fromEntries(attrs.map((a) => [a, values[a] ?? null]))),
    });
    return { state: unmp(res.state) as Obj | null, diagnostics: res.diagnostics as Diagnostic[] };
  }
}

export function assertNoErrors(what: string, diags: Diagnostic[] | undefined) {
  const errs = errors(diags);
  if (errs.length) throw new Error(`${what}: ${errs.map((d) => `${d.summary}: ${d.detail}`).join('; ')}`);
}
