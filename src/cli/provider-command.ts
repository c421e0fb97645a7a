// `kms-sync provider` (serve the provider: what Terraform runs) and `kms-sync provider install`
// (put it where Terraform and OpenTofu find it: src/provider/install.ts).
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import type { Command } from 'commander';
import { packageFile } from '../model/package-files.js';
import { printable } from '../model/printable.js';
import { ExitWith } from './errors.js';

export const PROVIDER_DESCRIPTION =
  'serve the Terraform/OpenTofu provider (plugin protocol 6; Terraform starts this itself); provider install: install it for Terraform and OpenTofu';

/** The --trusted-key files (a signature is then required), else the release keys this package ships. */
function trustedKeys(files: string[] | undefined): { file: string; text: string; asked: boolean }[] {
  if (files) {
    return files.map((file) => {
      try {
        return { file, text: readFileSync(file, 'utf8'), asked: true };
      } catch (e) {
        throw new ExitWith(
          1,
          `--trusted-key ${printable(file)}: ${(e as NodeJS.ErrnoException).code ?? (e as Error).message}`,
        );
      }
    });
  }
  const shipped = packageFile('release-signing-keys');
  return existsSync(shipped) ? [{ file: shipped, text: readFileSync(shipped, 'utf8'), asked: false }] : [];
}

export function registerProvider(program: Command) {
  const provider = program
    .command('provider')
    .description(PROVIDER_DESCRIPTION)
    .action(async () => process.exit(await (await import('../provider/main.js')).runProvider()));
  provider
    .command('install')
    .description(
      'install the provider for Terraform and OpenTofu on this machine: a filesystem mirror (default: the implied local mirror ~/.terraform.d/plugins) and a provider_installation block in the CLI configuration',
    )
    .option(
      '--dir <dir>',
      'the filesystem mirror to install into (with --dev: the folder of the dev_overrides executable)',
    )
    .option(
      '--from <release>',
      "install the packaged executable (no Node.js needed) from a release folder or this platform's release zip (npm run package:provider)",
    )
    .option(
      '--insecure-skip-checksum',
      'with --from: install a zip that has no SHA256SUMS file beside it (nothing then shows it is the zip that was released)',
      false,
    )
    .option(
      '--trusted-key <file>',
      "with --from: an ssh-ed25519 public key (or allowed_signers file) that must have signed the release's SHA256SUMS (repeatable; default: the keys this kms-sync ships in release-signing-keys)",
      (v: string, prev: string[] = []) => [...prev, v],
    )
    .option('--no-cli-config', 'leave the CLI configuration (TF_CLI_CONFIG_FILE or ~/.terraformrc) alone')
    .option(
      '--dev',
      "write dev_overrides instead, running this installation's provider code (for working on the provider itself)",
      false,
    )
    .option('--print', 'show what would be written and write nothing', false)
    .action(
      async (o: {
        dir?: string;
        from?: string;
        insecureSkipChecksum: boolean;
        trustedKey?: string[];
        cliConfig: boolean;
        dev: boolean;
        print: boolean;
      }) => {
        const { planInstall, applyInstall, InstallError } = await import('../provider/install.js');
        const providerScript = packageFile('dist', 'provider-bin', 'terraform-provider-kms.js');
        if (!o.from && !existsSync(providerScript))
          throw new ExitWith(1, `${providerScript} is missing: build kms-sync first (npm run build)`);
        const version = (JSON.parse(readFileSync(packageFile('package.json'), 'utf8')) as { version: string }).version;
        if (!o.from && (o.insecureSkipChecksum || o.trustedKey))
          throw new ExitWith(1, '--insecure-skip-checksum and --trusted-key go with --from (a release zip)');
        let plan;
        try {
          plan = planInstall({
            version,
            env: process.env,
            home: homedir(),
            platform: process.platform,
            arch: process.arch,
            dir: o.dir,
            from: o.from,
            cliConfig: o.cliConfig,
            dev: o.dev,
            node: process.execPath,
            providerScript,
            skipChecksum: o.insecureSkipChecksum,
            trustedKeys: trustedKeys(o.trustedKey),
          });
        } catch (e) {
          if (e instanceof InstallError) {
            process.stderr.write(`Error: ${printable(e.message)}\n${e.detail ? `\n${e.detail}` : ''}`);
            throw new ExitWith(1);
          }
          throw e;
        }
        const p = (s: string) => printable(s);
        const out: string[] = [];
        const what =
          plan.kind === 'packaged'
            ? 'packaged executable'
            : plan.kind === 'dev'
              ? 'dev_overrides launcher'
              : 'Node.js launcher';
        out.push(
          `kms-sync provider ${plan.version} for ${plan.platform} (${what})${o.print ? ': nothing is written (--print)' : ''}`,
        );
        for (const f of plan.unchanged) out.push(`  already installed: ${p(f)}`);
        for (const w of plan.writes) {
          out.push(`  ${o.print ? 'would write' : 'wrote'} ${p(w.file)} (${w.what}, mode ${w.mode.toString(8)})`);
          if (o.print && w.what.startsWith('launcher'))
            out.push(
              ...w.data
                .toString('utf8')
                .trimEnd()
                .split('\n')
                .map((l) => `      ${p(l)}`),
            );
        }
        for (const f of plan.removals)
          out.push(`  ${o.print ? 'would remove' : 'removed'} ${p(f)} (replaced by the packaged executable)`);
        for (const f of plan.configsUnchanged) out.push(`  CLI configuration already up to date: ${p(f)}`);
        if (!o.print) applyInstall(plan);
        for (const c of plan.configs) {
          const verb = c.before === undefined ? 'create' : 'update';
          const backup = c.before === undefined ? '' : `, backup ${c.file}.kms-sync.bak`;
          out.push(
            `  ${o.print ? `would ${verb}` : `${verb}d`} CLI configuration ${p(c.file)} (between kms-sync's marker comments${backup}):`,
          );
          out.push(...c.block.split('\n').map((l) => `      ${p(l)}`));
        }
        if (!o.cliConfig) out.push('  CLI configuration left alone (--no-cli-config)');
        if (plan.writes.length === 0 && plan.removals.length === 0 && plan.configs.length === 0)
          out.push('Already installed: nothing to do.');
        for (const n of plan.notes) out.push(`Note: ${p(n)}`);
        if (plan.kind !== 'dev')
          out.push(
            `Use it: required_providers { kms = { source = "kms-sync/kms", version = "${plan.version}" } }, then terraform init (or tofu init).`,
          );
        process.stdout.write(`${out.join('\n')}\n`);
      },
    );
}
