// `kms-sync demo`: the quick start on embedded defaults. Starts the emulator in-process, applies
// examples/acme, shows where every key went, then plans again to show there is nothing left to do.
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import type { Command } from 'commander';
import { startEmulator } from '../emulator/index.js';
import { packageFile } from '../model/package-files.js';
import { renderPlanText, colorEnabled } from '../report/index.js';
import { connect, loadConfig, planFor } from '../engine/run.js';
import { ExitWith } from './errors.js';
import { EXIT } from './exit-codes.js';
import { out } from './output.js';
import { runApply } from './sync-commands.js';

export function registerDemo(program: Command) {
  program
    .command('demo')
    .description(
      'start an in-process emulator and apply examples/acme to it (the quick start); --cdktf: the same setup as a CDKTF stack',
    )
    .option('-f, --file <path>', 'configuration to apply', packageFile('examples', 'acme'))
    .option(
      '--cdktf [dir]',
      'apply a CDKTF app instead (default: examples/cdktf; needs cdktf and constructs installed)',
    )
    .option(
      '--state-dir <dir>',
      'where the default secret store and journal go',
      path.join(process.cwd(), '.kms-sync-demo'),
    )
    .action(async (o: { file: string; stateDir: string; cdktf?: string | boolean }) => {
      // A throw-away project key for the throw-away service; it is never printed.
      const apiKey = `sk_test_demo${randomBytes(12).toString('hex')}`;
      // Everything the demo writes stays in its one folder: the age identity too, not ~/.config/sops.
      const stateDir = path.resolve(o.stateDir);
      const ageKeyFile = process.env.SOPS_AGE_KEY_FILE ?? path.join(stateDir, 'age-keys.txt');
      process.env.SOPS_AGE_KEY_FILE = ageKeyFile;
      const emu = await startEmulator({ port: 0, apiKeys: [apiKey] });
      out(`Emulator running at ${emu.url}\n\n`);
      // Every demo starts a new throw-away service on a new port: they are one target, so that a
      // demo run again in the same folder replaces the keys of the last one (whose service is gone).
      const env = { ...process.env, KMS_API_KEY: apiKey, KMS_API_URL: emu.url, KMS_SYNC_TARGET: 'kms-sync-demo' };
      const conn = connect({ parallelism: 8 }, env);
      try {
        const cfg = o.cdktf
          ? await loadConfig({
              file: [],
              env: [],
              cdktf: o.cdktf === true ? packageFile('examples', 'cdktf') : o.cdktf,
            })
          : await loadConfig({ file: [o.file], env: [] });
        const planOptions = { prune: false, baseDir: path.resolve(o.stateDir), policy: cfg.policy };
        const { plan } = await planFor(conn, cfg.desired, planOptions);
        out(renderPlanText(plan, { color: colorEnabled(process.stdout) }));
        const code = await runApply(conn, plan, path.resolve(o.stateDir), {
          parallelism: 8,
          policy: cfg.policy,
          allowLocalStoreInCi: true,
        });
        if (code !== EXIT.ok) throw new ExitWith(code);
        const again = await planFor(conn, cfg.desired, planOptions);
        out(`\nPlanning again against the same service:\n`);
        out(renderPlanText(again.plan, { color: colorEnabled(process.stdout) }));
        const shown = path.relative(process.cwd(), stateDir) || '.';
        out(
          `\nEverything the demo wrote is in ${stateDir}: the raw keys in an age-encrypted SOPS file under .kms-sync/, decrypted by the age identity ${path.relative(stateDir, ageKeyFile).startsWith('..') ? ageKeyFile : path.relative(stateDir, ageKeyFile)}. ` +
            `List them with: SOPS_AGE_KEY_FILE=${path.relative(process.cwd(), ageKeyFile) || ageKeyFile} kms-sync secrets list --state-dir ${shown}. Remove the folder to start over.\n`,
        );
        if (!o.cdktf) out('The same setup as a CDKTF stack in TypeScript (examples/cdktf): kms-sync demo --cdktf\n');
      } finally {
        await conn.api.close();
        await emu.close();
      }
    });
}
