// Start-up of terraform-provider-kms (and `kms-sync provider`): check that a plugin host started
// us, then serve. Only the cookie check runs before gRPC is imported, so a person running the
// binary by hand gets a human answer at once.
import { readFileSync, readlinkSync } from 'node:fs';
import path from 'node:path';

export const MAGIC_COOKIE_KEY = 'TF_PLUGIN_MAGIC_COOKIE';
export const MAGIC_COOKIE_VALUE = 'd602bf8f470bc67ca7faa0386276bbdd4330efaf76d1a219cb4d6991ca9872b2';

export const NOT_A_COMMAND = `terraform-provider-kms is a Terraform / OpenTofu provider plugin: Terraform starts it itself
and talks to it over plugin protocol 6. It is not meant to be run by hand.

To use it, install it where Terraform and OpenTofu find providers (kms-sync provider install)
and declare the provider in your configuration:

  terraform {
    required_providers {
      kms = { source = "kms-sync/kms" }
    }
  }

See the Terraform provider guide, docs/terraform-provider.md.
`;

/** How long changes in flight may take once the host is gone. */
const HOST_GONE_GRACE_MS = 10_000;

/**
 * Calls `onGone` once the process that started us has died: our parent changes (we are
 * re-parented) or no longer exists. go-plugin hands the plugin the host's own stdin, so its end
 * says nothing about the host: the parent pid is the signal. Polled every second, unref'ed.
 */
export function watchHost(onGone: () => Promise<void>, everyMs = 1_000): () => void {
  const parent = process.ppid;
  // Installed behind a shell wrapper that does not `exec` (the one in docs/terraform-provider.md does), our parent is that
  // shell, which outlives a killed Terraform: then Terraform is the shell's parent, and the
  // shell's re-parenting is the signal (Linux /proc; elsewhere only our own parent is watched).
  const shellParent = /^(sh|bash|dash|zsh|ash|busybox)$/.test(path.basename(procExe(parent) ?? ''));
  const host = shellParent ? Number(procStatPpid(parent)) : undefined;
  let fired = false;
  const fire = () => {
    if (fired) return;
    fired = true;
    clearInterval(timer);
    void onGone().catch(() => undefined);
  };
  const timer = setInterval(() => {
    let alive = process.ppid === parent;
    if (alive) {
      try {
        process.kill(parent, 0);
      } catch (e) {
        alive = (e as NodeJS.ErrnoException).code === 'EPERM';
      }
    }
    if (alive && host !== undefined && host > 1) alive = Number(procStatPpid(parent)) === host;
    if (!alive) fire();
  }, everyMs);
  timer.unref();
  if (parent <= 1) clearInterval(timer);
  return fire;
}

/** The executable of a process (a script's interpreter, not the script). */
function procExe(pid: number): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/exe`);
  } catch {
    return undefined;
  }
}

/** The parent pid of `pid` from /proc/<pid>/stat (after the parenthesised command name). */
function procStatPpid(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1];
  } catch {
    return undefined;
  }
}

/** Runs the provider until the host shuts it down; resolves with the exit code. */
export async function runProvider(env: NodeJS.ProcessEnv = process.env): Promise<number> {
  if (env[MAGIC_COOKIE_KEY] !== MAGIC_COOKIE_VALUE) {
    process.stderr.write(NOT_A_COMMAND);
    return 1;
  }
  // stdout carries the handshake line and nothing else: everything we print goes to stderr.
  console.log = console.error;
  console.info = console.error;
  // A killed Terraform closes the read ends of our stdout and stderr: a write then fails with
  // EPIPE, which must not crash the process while a key is on its way to its store.
  let hostGone: (() => void) | undefined;
  let pipesClosed = false;
  for (const stream of [process.stdout, process.stderr]) {
    stream.on('error', () => {
      if (pipesClosed) return;
      pipesClosed = true;
      console.error = () => undefined;
      hostGone?.();
    });
  }
  // Ctrl-C reaches the whole process group; the host answers it with StopProvider, and an apply
  // in flight (a key on its way to the store) must finish rather than die mid-write.
  process.on('SIGINT', () => undefined);
  const [{ servePlugin, HandshakeError }, { readSchemaWire }] = await Promise.all([
    import('./plugin/serve.js'),
    import('./schema-wire.js'),
  ]);
  let provider: Awaited<ReturnType<typeof import('./provider.js')['createProvider']>> | undefined;
  const stopped = new Promise<void>((resolve) => {
    servePlugin({
      env,
      loadProvider: async () => (provider = (await import('./provider.js')).createProvider({ env })),
      // The schema (Terraform's first start of each command asks for nothing else), encoded at build time.
      encodedAnswers: readSchemaWire,
      onStopped: resolve,
    }).then(
      (running) => {
        process.once('SIGTERM', () => void running.shutdown());
        // Terraform killed (SIGKILL, OOM): nobody will call Shutdown. Stop starting changes, let the
        // ones in flight finish and journal what they issued (bounded), then exit.
        hostGone = watchHost(async () => {
          await provider?.StopProvider?.({});
          await running.idle(HOST_GONE_GRACE_MS);
          await provider?.drain?.(2_000);
          const forced = setTimeout(() => resolve(), 2_000);
          forced.unref();
          await running.shutdown();
        });
      },
      (e: unknown) => {
        process.stderr.write(
          `terraform-provider-kms: ${e instanceof HandshakeError ? '' : 'failed to start: '}${(e as Error).message}\n`,
        );
        process.exitCode = 1;
        resolve();
      },
    );
  });
  await stopped;
  return typeof process.exitCode === 'number' ? process.exitCode : 0;
}
