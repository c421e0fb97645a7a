// The go-plugin side of a Terraform provider: protocol negotiation, AutoMTLS, the gRPC server
// with the provider and go-plugin's own services, the one handshake line on stdout, shutdown.
// This module is on the start-up path: it imports the gRPC server and nothing of kms-sync's engine (the
// provider implementation is loaded by `loadProvider` on the first RPC that needs it).
import { makeServerCertificate } from './certificate.js';
import {
  EncodedMessage,
  GrpcError,
  GrpcServer,
  GrpcStatus,
  type ServerStream,
  type TlsOptions,
} from './grpc-server.js';
import { loadProtocol } from './protocol.js';

/** The one protocol version this provider speaks. */
export const PROVIDER_PROTOCOL_VERSION = 6;
/** go-plugin's own protocol version: the first field of the handshake line. */
export const CORE_PROTOCOL_VERSION = 1;

/** A provider RPC: decoded request message in, response message out (or a thrown error). */
// biome-ignore lint/suspicious/noExplicitAny: each handler reads its own message's decoded fields
export type RpcHandler = (request: any) => Promise<unknown>;
export type ProviderImplementation = Partial<Record<string, RpcHandler>>;

export interface ServePluginOptions {
  /**
   * Loads the provider implementation, on the first RPC that needs it: a start that is only asked
   * for answers of `encodedAnswers` (Terraform's first start of a command asks only for the schema)
   * never loads it.
   */
  loadProvider: () => Promise<ProviderImplementation>;
  /** Answers that never change, already encoded (method → response bytes), read on the first RPC. */
  encodedAnswers?: () => Partial<Record<string, Buffer>> | undefined;
  env?: NodeJS.ProcessEnv;
  /** Where the handshake line goes (default: process.stdout). */
  writeHandshake?: (line: string) => void;
  /** Called once the server has stopped (after GRPCController.Shutdown or `shutdown()`). */
  onStopped?: () => void;
}

export interface RunningPlugin {
  handshake: string;
  port: number;
  shutdown(): Promise<void>;
  /** Resolves once no provider RPC is running (or after `ms`): what is in flight finishes first. */
  idle(ms: number): Promise<void>;
}

export class HandshakeError extends Error {}

/** Picks protocol 6 from the host's offer (`PLUGIN_PROTOCOL_VERSIONS=5,6`); absent = a host that only knows 6. */
export function negotiateVersion(offer: string | undefined): number {
  if (!offer) return PROVIDER_PROTOCOL_VERSION;
  const versions = offer.split(',').map((v) => Number(v.trim()));
  if (versions.includes(PROVIDER_PROTOCOL_VERSION)) return PROVIDER_PROTOCOL_VERSION;
  throw new HandshakeError(
    `this provider speaks plugin protocol ${PROVIDER_PROTOCOL_VERSION}, the host offers ${offer}: use Terraform >= 1.0 or OpenTofu`,
  );
}

/** Host ports from PLUGIN_MIN_PORT/PLUGIN_MAX_PORT when set (as go-plugin honours them), else any free port. */
async function bind(server: GrpcServer, tls: TlsOptions | undefined, env: NodeJS.ProcessEnv): Promise<number> {
  const listen = (port: number) => server.listen(port, tls);
  const min = Number(env.PLUGIN_MIN_PORT || 0);
  const max = Number(env.PLUGIN_MAX_PORT || 0);
  if (!min && !max) return listen(0);
  if (!(min > 0 && max >= min))
    throw new HandshakeError(
      `PLUGIN_MIN_PORT (${env.PLUGIN_MIN_PORT}) / PLUGIN_MAX_PORT (${env.PLUGIN_MAX_PORT}) is not a port range`,
    );
  for (let port = min; port <= max; port++) {
    try {
      return await listen(port);
    } catch {
      // taken: try the next one
    }
  }
  throw new HandshakeError(`no free port between PLUGIN_MIN_PORT=${min} and PLUGIN_MAX_PORT=${max}`);
}

const errorText = (e: unknown) => (e instanceof Error ? e.message : String(e));

export async function servePlugin(opts: ServePluginOptions): Promise<RunningPlugin> {
  const env = opts.env ?? process.env;
  const version = negotiateVersion(env.PLUGIN_PROTOCOL_VERSIONS);
  const proto = loadProtocol();

  // AutoMTLS: the host passes its client certificate; we answer with our own in the handshake and
  // accept only that client. Without one (a host that manages TLS itself, or a debugger) the
  // server is plain, as go-plugin's is.
  const clientCert = env.PLUGIN_CLIENT_CERT;
  let tls: TlsOptions | undefined;
  let certField = '';
  if (clientCert) {
    const own = makeServerCertificate();
    tls = { cert: Buffer.from(own.certPem), key: Buffer.from(own.keyPem), clientCa: Buffer.from(clientCert) };
    certField = own.der.toString('base64').replace(/=+$/, '');
  }

  const server = new GrpcServer(256 * 1024 * 1024);
  let provider: Promise<ProviderImplementation> | undefined;
  const getProvider = () => (provider ??= opts.loadProvider());

  // tfplugin6.Provider: every declared RPC goes to the implementation; a missing one answers UNIMPLEMENTED.
  const service = proto.provider;
  const handlers: Record<string, (request: unknown) => Promise<unknown>> = {};
  // RPCs in flight, so that a host that went away (killed) still lets them finish.
  const inFlight = new Set<Promise<unknown>>();
  let impl: ProviderImplementation | undefined;
  let encoded: Partial<Record<string, Buffer>> | undefined;
  const call = async (name: string, request: unknown) => {
    encoded ??= opts.encodedAnswers?.() ?? {};
    const bytes = encoded[name];
    if (bytes) return new EncodedMessage(bytes);
    if (!impl) {
      try {
        impl = await getProvider();
      } catch (e) {
        throw new GrpcError(GrpcStatus.INTERNAL, `the provider failed to load: ${errorText(e)}`);
      }
    }
    const fn = impl[name];
    if (!fn) throw new GrpcError(GrpcStatus.UNIMPLEMENTED, `${name} is not implemented by terraform-provider-kms`);
    try {
      return await fn(request);
    } catch (e) {
      // Terraform shows a gRPC error as "Plugin error"; our own failures travel as diagnostics instead.
      throw new GrpcError(GrpcStatus.INTERNAL, errorText(e));
    }
  };
  for (const name of Object.keys(service)) {
    handlers[name] = (request: unknown) => {
      const running = call(name, request);
      inFlight.add(running);
      void running.then(
        () => inFlight.delete(running),
        () => inFlight.delete(running),
      );
      return running;
    };
  }
  server.addService(service, handlers);

  const stdioStreams = new Set<ServerStream>();
  server.addService(proto.stdio, {
    // Our output goes to stderr, which the host reads directly; the stream stays open and quiet
    // until shutdown, as the host expects it to.
    StreamStdio: (_request: unknown, stream: ServerStream) => {
      stdioStreams.add(stream);
      stream.onCancel(() => stdioStreams.delete(stream));
    },
  });

  let stopping: Promise<void> | undefined;
  const shutdown = () =>
    (stopping ??= new Promise<void>((resolve) => {
      for (const s of stdioStreams) s.end();
      stdioStreams.clear();
      // Let running RPCs (an apply writing a key to its store) finish; force after a grace period.
      const force = setTimeout(() => server.forceShutdown(), 10_000);
      force.unref();
      server.tryShutdown(() => {
        clearTimeout(force);
        resolve();
        opts.onStopped?.();
      });
    }));
  server.addService(proto.controller, {
    Shutdown: () => {
      setImmediate(() => void shutdown());
      return {};
    },
  });
  server.addService(proto.health, { Check: () => ({ status: 'SERVING' }) });

  const port = await bind(server, tls, env);
  const handshake = `${CORE_PROTOCOL_VERSION}|${version}|tcp|127.0.0.1:${port}|grpc|${certField}`;
  (opts.writeHandshake ?? ((line) => process.stdout.write(`${line}\n`)))(handshake);
  const idle = async (ms: number) => {
    const end = Date.now() + ms;
    while (inFlight.size > 0 && Date.now() < end) {
      await Promise.race([
        Promise.allSettled([...inFlight]),
        new Promise((ok) => setTimeout(ok, Math.max(0, end - Date.now())).unref()),
      ]);
    }
  };
  return { handshake, port, shutdown, idle };
}
