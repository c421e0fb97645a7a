// Start-up of terraform-provider-kms (and `kms-sync provider`): check that a plugin host started
// us, then serve. Only the cookie check runs before gRPC is imported, so a person running the
// binary by hand gets a human answer at once.
export const MAGIC_COOKIE_KEY = 'TF_PLUGIN_MAGIC_COOKIE';
export const MAGIC_COOKIE_VALUE = 'd602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2';

export const NOT_A_COMMAND = `terraform-provider-kms is a Terraform / OpenTofu provider plugin: Terraform starts it itself
and talks to it over plugin protocol 6. It is not meant to be run by hand.

To use it, install it where Terraform finds providers (a filesystem mirror or a dev_overrides
block in your CLI configuration) and declare the provider in your configuration:

  terraform {
    required_providers {
      kms = { source = "registry.terraform.io/kms-sync/kms" }
    }
  }

See the README section "Terraform provider".
`;

/** Runs the provider until the host shuts it down; resolves with the exit code. */
export async function runProvider(env: NodeJS.ProcessEnv = process.env): Promise<number> {
  if (env[MAGIC_COOKIE_KEY] !== MAGIC_COOKIE_VALUE) {
    process.stderr.write(NOT_A_COMMAND);
    return 1;
  }
  // stdout carries the handshake line and nothing else: everything we print goes to stderr.
  console.log = console.error;
  console.info = console.error;
  // Ctrl-C reaches the whole process group; the host answers it with StopProvider, and an apply
  // in flight (a key on its way to the store) must finish rather than die mid-write.
  process.on('SIGINT', () => undefined);
  const { servePlugin, HandshakeError } = await import('./plugin/serve.js');
  const stopped = new Promise<void>((resolve) => {
    servePlugin({
      env,
      loadProvider: async () => (await import('./provider.js')).createProvider({ env }),
      onStopped: resolve,
    }).then((running) => {
      process.once('SIGTERM', () => void running.shutdown());
    }, (e: unknown) => {
      process.stderr.write(`terraform-provider-kms: ${e instanceof HandshakeError ? '' : 'failed to start: '}${(e as Error).message}\n`);
      process.exitCode = 1;
      resolve();
    });
  });
  await stopped;
  return typeof process.exitCode === 'number' ? process.exitCode : 0;
}
