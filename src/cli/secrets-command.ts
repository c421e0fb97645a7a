// `kms-sync secrets list|flush`: what the stores and the journal hold, never values unless one
// named secret is revealed on purpose.
import path from 'node:path';
import type { Command } from 'commander';
import { JournaledKeyCapture } from '../apply/journaled-capture.js';
import type { StoreDeclaration } from '../model/index.js';
import { StoreRegistry } from '../secrets/registry.js';
import { addCdktfOptions, usesCdktf, type CdktfFlags } from './cdktf-input.js';
import { loadConfig } from './context.js';
import { UsageError } from './errors.js';
import { err, out } from './output.js';

const collect = (v: string, prev: string[]) => [...prev, v];

async function registryFor(o: { file: string[]; stateDir?: string } & CdktfFlags): Promise<StoreRegistry> {
  let declarations: StoreDeclaration[] = [];
  let baseDir = path.resolve(o.stateDir ?? process.cwd());
  // A CDKTF app's stores are its KmsProvider's secret_store blocks, relative to its folder (or base_dir).
  if (o.file.length || usesCdktf(o)) {
    const cfg = await loadConfig({ file: o.file, env: [], cdktf: o.cdktf, cdktfOut: o.cdktfOut, stack: o.stack ?? [] });
    declarations = cfg.desired.stores;
    baseDir = o.stateDir ? path.resolve(o.stateDir) : cfg.baseDir;
  }
  return new StoreRegistry({ declarations, baseDir, onNotice: (m) => err(`${m}\n`) });
}

export function registerSecrets(program: Command) {
  const secrets = program.command('secrets').description('inspect the secret stores and the key journal');
  addCdktfOptions(secrets
    .command('list')
    .description('list secret names and dates (values only with --reveal NAME, for one secret)')
    .option('-f, --file <path>', 'configuration whose stores to use (repeatable)', collect, []))
    .option('--state-dir <dir>', 'folder holding .kms-sync/ (default: the configuration folder, else the current one)')
    .option('--store <name>', 'a store declared under stores: (default: the default store)')
    .option('--reveal <name>', 'print the raw value of this one secret (to a terminal you trust)')
    .option('--json', 'print names and dates as one JSON object (never values)')
    .action(async (o: { file: string[]; stateDir?: string; store?: string; reveal?: string; json?: boolean } & CdktfFlags) => {
      if (o.json && o.reveal) throw new UsageError('--json lists names and dates; --reveal prints one value: use one of them');
      const registry = await registryFor(o);
      const store = await registry.get(o.store);
      const pending = await new JournaledKeyCapture(registry).journal.pending();
      if (o.reveal) {
        if (!store.read) throw new UsageError(`${store.displayUri} does not allow reading values back`);
        const value = await store.read(o.reveal);
        if (value === undefined) throw new UsageError(`no secret named ${o.reveal} in ${store.displayUri}`);
        // Deliberate, explicit, one value: bypasses the output redaction on purpose.
        process.stdout.write(`${value}\n`);
        return;
      }
      if (!store.list) throw new UsageError(`${store.displayUri} cannot list its secrets`);
      const items = await store.list();
      if (o.json) {
        const secrets = items.sort((a, b) => (a.name < b.name ? -1 : 1)).map((i) => ({
          name: i.name, updated_at: i.updatedAt, ...(i.meta?.expiresAt ? { expires_at: i.meta.expiresAt } : {}), ...(i.meta?.keyId ? { key_id: i.meta.keyId } : {}),
        }));
        out(`${JSON.stringify({ store: store.displayUri, secrets, journal_pending: pending.length }, null, 2)}\n`);
        return;
      }
      out(`${store.displayUri}: ${items.length} secret(s)\n`);
      for (const i of items.sort((a, b) => (a.name < b.name ? -1 : 1))) {
        out(`  ${i.name}  updated ${i.updatedAt}${i.meta?.expiresAt ? `  expires ${i.meta.expiresAt}` : ''}${i.meta?.keyId ? `  key ${i.meta.keyId}` : ''}${i.meta?.target ? `  service ${i.meta.target}` : ''}\n`);
      }
      if (pending.length) out(`Journal: ${pending.length} key(s) waiting for their store (run kms-sync secrets flush)\n`);
    });
  addCdktfOptions(secrets
    .command('flush')
    .description('write keys left in the journal by an interrupted run to their stores')
    .option('-f, --file <path>', 'configuration whose stores to use (repeatable)', collect, []))
    .option('--state-dir <dir>', 'folder holding .kms-sync/ (default: the configuration folder, else the current one)')
    .action(async (o: { file: string[]; stateDir?: string } & CdktfFlags) => {
      const capture = new JournaledKeyCapture(await registryFor(o));
      const n = await capture.flushPending();
      out(n ? `Flushed ${n} key(s) from the journal to their stores.\n` : 'The journal is empty: nothing to flush.\n');
    });
}
