// `kms-sync secrets list|prune|flush`: what the stores and the journal hold, never values unless one
// named secret is revealed on purpose.
import path from 'node:path';
import { createInterface } from 'node:readline/promises';
import type { Command } from 'commander';
import { JournaledKeyCapture } from '../apply/journaled-capture.js';
import type { OperatorPolicy, StoreDeclaration } from '../model/index.js';
import { StoreRegistry } from '../secrets/registry.js';
import { addCdktfOptions, usesCdktf, type CdktfFlags } from './cdktf-input.js';
import { connect, findDefaultConfig, loadConfig, policyFor } from '../engine/run.js';
import { UsageError } from './errors.js';
import { err, flushOutput, out, writeUnredacted } from './output.js';
import { keyStates, type KeyState } from './secret-keys.js';
import { printable as p } from '../model/printable.js';

const collect = (v: string, prev: string[]) => [...prev, v];

async function registryFor(o: { file: string[]; stateDir?: string } & CdktfFlags): Promise<StoreRegistry> {
  let declarations: StoreDeclaration[] = [];
  let baseDir = path.resolve(o.stateDir ?? process.cwd());
  let policy: OperatorPolicy | undefined;
  // A CDKTF app's stores are its KmsProvider's secret_store blocks, relative to its folder (or base_dir).
  // Without -f, the kms-sync.yaml here or in the nearest parent folder, as every other command reads
  // it: its default store is the one apply wrote to (a Vault default store, say), not a local file.
  if (o.file.length || usesCdktf(o) || (await findDefaultConfig())) {
    const cfg = await loadConfig({ file: o.file, env: [], cdktf: o.cdktf, cdktfOut: o.cdktfOut, stack: o.stack ?? [] });
    declarations = cfg.desired.stores;
    baseDir = o.stateDir ? path.resolve(o.stateDir) : cfg.baseDir;
    policy = cfg.policy;
  }
  return new StoreRegistry({
    declarations,
    baseDir,
    policy: policy ?? policyFor({}, baseDir),
    onNotice: (m) => err(`${m}\n`),
  });
}

export function registerSecrets(program: Command) {
  const secrets = program.command('secrets').description('inspect the secret stores and the key journal');
  addCdktfOptions(
    secrets
      .command('list')
      .description('list secret names and dates (values only with --reveal NAME, for one secret)')
      .option(
        '-f, --file <path>',
        'configuration whose stores to use (repeatable; default: kms-sync.yaml here or in the nearest parent folder)',
        collect,
        [],
      ),
  )
    .option('--state-dir <dir>', 'folder holding .kms-sync/ (default: the configuration folder, else the current one)')
    .option('--store <name>', 'a store declared under stores: (default: the default store)')
    .option('--reveal <name>', 'print the raw value of this one secret (to a terminal you trust)')
    .option('--json', 'print names and dates as one JSON object (never values)')
    .option(
      '--url <url>',
      'service base URL ending in /api/v1 (default: $KMS_API_URL); with KMS_API_KEY set, secrets whose key is gone are marked',
    )
    .action(
      async (
        o: {
          file: string[];
          stateDir?: string;
          store?: string;
          reveal?: string;
          json?: boolean;
          url?: string;
        } & CdktfFlags,
      ) => {
        if (o.json && o.reveal)
          throw new UsageError('--json lists names and dates; --reveal prints one value: use one of them');
        const registry = await registryFor(o);
        const store = await registry.get(o.store);
        const pending = await new JournaledKeyCapture(registry).journal.pending();
        if (o.reveal) {
          if (!store.read) throw new UsageError(`${store.displayUri} does not allow reading values back`);
          const value = await store.read(o.reveal);
          if (value === undefined) throw new UsageError(`no secret named ${o.reveal} in ${store.displayUri}`);
          // Deliberate, explicit, one value: bypasses the output redaction on purpose.
          writeUnredacted('stdout', `${value}\n`);
          return;
        }
        if (!store.list) throw new UsageError(`${store.displayUri} cannot list its secrets`);
        const items = await store.list();
        // With a service configured, each secret of this service is checked against the live keys.
        const states = await liveStates(o, items);
        if (o.json) {
          const secrets = items
            .sort((a, b) => (a.name < b.name ? -1 : 1))
            .map((i) => {
              const st = states?.get(i.name);
              return {
                name: i.name,
                updated_at: i.updatedAt,
                ...(i.meta?.expiresAt ? { expires_at: i.meta.expiresAt } : {}),
                ...(i.meta?.keyId ? { key_id: i.meta.keyId } : {}),
                ...(st ? { key_state: st.state, ...(st.state !== 'live' ? { key_state_reason: st.why } : {}) } : {}),
              };
            });
          out(`${JSON.stringify({ store: store.displayUri, secrets, journal_pending: pending.length }, null, 2)}\n`);
          return;
        }
        out(`${store.displayUri}: ${items.length} secret(s)\n`);
        let gone = 0;
        for (const i of items.sort((a, b) => (a.name < b.name ? -1 : 1))) {
          const st = states?.get(i.name);
          if (st?.state === 'gone') gone++;
          out(
            `  ${p(i.name)}  updated ${p(i.updatedAt)}${i.meta?.expiresAt ? `  expires ${p(i.meta.expiresAt)}` : ''}${i.meta?.keyId ? `  key ${p(i.meta.keyId)}` : ''}${i.meta?.target ? `  service ${p(i.meta.target)}` : ''}${st?.state === 'gone' ? `  KEY GONE: ${p(st.why)}` : ''}\n`,
          );
        }
        if (gone) out(`${gone} secret(s) hold a key that no longer exists: kms-sync secrets prune removes them\n`);
        if (!states) out('(Set KMS_API_URL and KMS_API_KEY to mark secrets whose key no longer exists.)\n');
        if (pending.length)
          out(`Journal: ${pending.length} key(s) waiting for their store (run kms-sync secrets flush)\n`);
      },
    );
  addCdktfOptions(
    secrets
      .command('prune')
      .description(
        "remove secrets whose key no longer exists in the live service (this service's secrets only; asks first)",
      )
      .option(
        '-f, --file <path>',
        'configuration whose stores to use (repeatable; default: kms-sync.yaml here or in the nearest parent folder)',
        collect,
        [],
      ),
  )
    .option('--state-dir <dir>', 'folder holding .kms-sync/ (default: the configuration folder, else the current one)')
    .option('--store <name>', 'a store declared under stores: (default: the default store)')
    .option('--url <url>', 'service base URL ending in /api/v1 (default: $KMS_API_URL)')
    .option('-y, --yes', 'remove without asking (scripts, CI)')
    .action(
      async (o: { file: string[]; stateDir?: string; store?: string; url?: string; yes?: boolean } & CdktfFlags) => {
        const registry = await registryFor(o);
        const store = await registry.get(o.store);
        if (!store.list) throw new UsageError(`${store.displayUri} cannot list its secrets`);
        const items = await store.list();
        const states = await liveStates(o, items, true);
        const gone = items
          .filter((i) => states!.get(i.name)?.state === 'gone')
          .sort((a, b) => (a.name < b.name ? -1 : 1));
        const unchecked = items.filter((i) => states!.get(i.name)?.state === 'unchecked').length;
        const note = unchecked
          ? ` (${unchecked} secret(s) of another service, or recording none, were not checked and are kept)`
          : '';
        if (gone.length === 0) {
          out(
            `Nothing to prune: every secret of this service in ${store.displayUri} holds a key that exists${note}.\n`,
          );
          return;
        }
        if (!store.deleteMany)
          throw new UsageError(
            `${store.displayUri} cannot remove secrets here; remove these there by hand: ${gone.map((g) => p(g.name)).join(', ')}`,
          );
        out(`${gone.length} secret(s) in ${store.displayUri} hold a key that no longer exists${note}:\n`);
        for (const g of gone)
          out(`  - ${p(g.name)}: ${p((states!.get(g.name) as Extract<KeyState, { state: 'gone' }>).why)}\n`);
        if (!o.yes) {
          if (!process.stdin.isTTY)
            throw new UsageError(
              'refusing to remove secrets without confirmation: stdin is not a terminal to ask on. Review the list and pass --yes',
            );
          // The list first: the question is written by readline, past the output queue.
          flushOutput();
          const rl = createInterface({
            input: process.stdin,
            output: process.stdout.isTTY ? process.stdout : process.stderr,
          });
          const answer = await rl
            .question('\nRemove these secrets? Only "yes" will be accepted: ')
            .finally(() => rl.close());
          if (answer.trim() !== 'yes') {
            out('Prune cancelled.\n');
            process.exitCode = 1;
            return;
          }
        }
        // Each only if it still holds the key judged gone: a run that stored a new key meanwhile keeps it.
        const removed = await store.deleteMany(
          gone.map((g) => ({ name: g.name, ...(g.meta?.keyId ? { keyId: g.meta.keyId } : {}) })),
        );
        out(
          `Removed ${removed.length} secret(s) from ${store.displayUri}.${removed.length < gone.length ? ` ${gone.length - removed.length} changed meanwhile and were kept.` : ''}\n`,
        );
      },
    );
  addCdktfOptions(
    secrets
      .command('flush')
      .description('write keys left in the journal by an interrupted run to their stores')
      .option(
        '-f, --file <path>',
        'configuration whose stores to use (repeatable; default: kms-sync.yaml here or in the nearest parent folder)',
        collect,
        [],
      ),
  )
    .option('--state-dir <dir>', 'folder holding .kms-sync/ (default: the configuration folder, else the current one)')
    .action(async (o: { file: string[]; stateDir?: string } & CdktfFlags) => {
      const capture = new JournaledKeyCapture(await registryFor(o));
      const n = await capture.flushPending();
      out(n ? `Flushed ${n} key(s) from the journal to their stores.\n` : 'The journal is empty: nothing to flush.\n');
    });
}

/**
 * Key states of the listed secrets when a service is configured (KMS_API_URL or --url, and
 * KMS_API_KEY); `required`: without one it is an error (prune), else undefined (list).
 */
async function liveStates(
  o: { url?: string },
  items: Parameters<typeof keyStates>[1],
  required = false,
): Promise<Map<string, KeyState> | undefined> {
  if (!required && !((o.url ?? process.env.KMS_API_URL) && process.env.KMS_API_KEY)) return undefined;
  const conn = connect({ url: o.url, parallelism: 8 }, process.env, (line) => err(`${line}\n`));
  try {
    return await keyStates(conn, items);
  } catch (e) {
    // list works offline as before: the marks are extra.
    if (required) throw e;
    err(
      `warning: could not check the keys against the service (${(e as Error).message}); secrets are listed unmarked\n`,
    );
    return undefined;
  } finally {
    await conn.api.close();
  }
}
