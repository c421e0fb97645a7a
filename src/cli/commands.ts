// The command table of the CLI. Each command module is imported only when its command runs: the
// layers behind a command (API client, secret stores, emulator, report publishers) are never
// loaded by `kms-sync --version`, `--help` or another command. The top-level help is built from
// the short entries below; a test checks it against the help of the fully registered program.
import { Command } from 'commander';
import { finishHelp, optionDescription } from './help.js';

type Register = (program: Command) => void;

interface CommandModule {
  /** The commands the module registers, with the term and description the top-level help shows. */
  commands: { name: string; term: string; description: string }[];
  load: () => Promise<Register>;
}

export const COMMAND_MODULES: CommandModule[] = [
  {
    commands: [
      {
        name: 'validate',
        term: 'validate [options]',
        description:
          'check configuration files offline (no credentials, no network): syntax, schema, references, duplicates',
      },
      {
        name: 'init',
        term: 'init [file]',
        description: 'write a starter configuration that references the JSON Schema (editor completion)',
      },
      {
        name: 'schema',
        term: 'schema',
        description: 'print the JSON Schema of the configuration format (for editors and linters)',
      },
      { name: 'plan', term: 'plan [options]', description: 'show what apply would change in the live service' },
      {
        name: 'apply',
        term: 'apply [options] [planfile]',
        description: 'plan, confirm, then make the live service match the configuration',
      },
      {
        name: 'rotate',
        term: 'rotate [options]',
        description: 'rotate selected keys now: issue and store a new key, then retire the old one',
      },
      {
        name: 'destroy',
        term: 'destroy [options]',
        description:
          'delete everything this configuration owns in its environments: its clients and endpoints, then the environments and projects it defines once nothing else is left in them',
      },
      {
        name: 'show',
        term: 'show [options] <planfile>',
        description: 'show a plan saved with kms-sync plan --out, without contacting the service',
      },
      {
        name: 'export',
        term: 'export [options]',
        description:
          'write the live state of environments as YAML in the configuration format, or as a CDKTF stack (no secrets)',
      },
    ],
    load: async () => (await import('./sync-commands.js')).registerSyncCommands,
  },
  {
    commands: [
      {
        name: 'drift',
        term: 'drift [options]',
        description:
          'compare the live service with the desired state and classify every difference: changed outside, missing, unmanaged, secret missing, expiring (exit 2 when drift exists)',
      },
    ],
    load: async () => (await import('./drift-command.js')).registerDrift,
  },
  {
    commands: [
      {
        name: 'agent',
        term: 'agent [options]',
        description:
          'run continuously: pull the configuration from git, reconcile it on an interval and on webhooks, serve metrics, status and a status page',
      },
    ],
    load: async () => (await import('./agent-command.js')).registerAgent,
  },
  {
    commands: [
      {
        name: 'report',
        term: 'report',
        description: 'work with reports: merge the plans or drift reports of a sharded run',
      },
    ],
    load: async () => (await import('./report-command.js')).registerReport,
  },
  {
    commands: [{ name: 'secrets', term: 'secrets', description: 'inspect the secret stores and the key journal' }],
    load: async () => (await import('./secrets-command.js')).registerSecrets,
  },
  {
    commands: [
      {
        name: 'emulator',
        term: 'emulator [options]',
        description: 'run a local emulator of the key-management service (real HTTP on 127.0.0.1)',
      },
    ],
    load: async () => (await import('./emulator-command.js')).registerEmulator,
  },
  {
    commands: [
      {
        name: 'demo',
        term: 'demo [options]',
        description:
          'start an in-process emulator and apply examples/acme to it (the quick start); --cdktf: the same setup as a CDKTF stack',
      },
    ],
    load: async () => (await import('./demo-command.js')).registerDemo,
  },
  {
    commands: [
      {
        name: 'provider',
        term: 'provider',
        description:
          'serve the Terraform/OpenTofu provider (plugin protocol 6; Terraform starts this itself); provider install: install it for Terraform and OpenTofu',
      },
    ],
    load: async () => (await import('./provider-command.js')).registerProvider,
  },
  {
    commands: [{ name: 'version', term: 'version', description: 'print the version of kms-sync' }],
    load: async () => (program: Command) => {
      program
        .command('version')
        .description('print the version of kms-sync')
        .action(() => {
          process.stdout.write('kms-sync 0.1.0\n');
        });
    },
  },
  {
    commands: [
      {
        name: 'completion',
        term: 'completion <shell>',
        description: 'print a shell completion script (bash, zsh or fish)',
      },
    ],
    load: async () => (program: Command) => {
      program
        .command('completion')
        .description('print a shell completion script (bash, zsh or fish)')
        .argument('<shell>', 'bash, zsh or fish')
        .action(async (shell: string) => {
          process.stdout.write((await import('./completion.js')).completionScript(shell, await buildFullProgram()));
        });
    },
  },
];

function baseProgram(): Command {
  return new Command()
    .name('kms-sync')
    .description(
      'Manage API access as code: plan and apply projects, environments, templates, clients, keys and endpoints.',
    )
    .version('0.1.0')
    .option('--no-color', 'no colours in the output, anywhere on the line (also NO_COLOR=1)')
    .exitOverride();
}

/** The command word of an argument list (`plan` in `plan -f x`, `plan` in `help plan`), if any. */
export function commandWord(args: readonly string[]): string | undefined {
  const words = args.filter((a) => !a.startsWith('-'));
  return words[0] === 'help' ? words[1] : words[0];
}

/**
 * The program for `args` (without node and the script): the module of the command named there is
 * loaded and registered; every other command is a placeholder that only lists itself in the help.
 */
export async function buildProgram(args: readonly string[]): Promise<Command> {
  const program = baseProgram();
  const word = commandWord(args);
  const wanted = COMMAND_MODULES.find((m) => m.commands.some((c) => c.name === word));
  const terms = new Map<string, string>();
  for (const m of COMMAND_MODULES) {
    if (m === wanted) {
      (await m.load())(program);
      continue;
    }
    for (const c of m.commands) {
      program.command(c.name).description(c.description);
      terms.set(c.name, c.term);
    }
  }
  finishHelp(program);
  if (terms.size > 0) {
    program.configureHelp({ optionDescription, subcommandTerm: (cmd) => terms.get(cmd.name()) ?? defaultTerm(cmd) });
  }
  return program;
}

/** Every command module registered (tests: the top-level help of the placeholders must match it). */
export async function buildFullProgram(): Promise<Command> {
  const program = baseProgram();
  for (const m of COMMAND_MODULES) (await m.load())(program);
  finishHelp(program);
  return program;
}

function defaultTerm(cmd: Command): string {
  const args = cmd.registeredArguments
    .map((a) => (a.required ? `<${a.name()}${a.variadic ? '...' : ''}>` : `[${a.name()}${a.variadic ? '...' : ''}]`))
    .join(' ');
  return `${cmd.name()}${cmd.options.length ? ' [options]' : ''}${args ? ` ${args}` : ''}`;
}
