// What every command's --help ends with: the environment it reads, its exit codes and examples; and
// option lists without commander's "(default: [])" for repeatable flags.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Help, type Command } from 'commander';

const SERVICE_ENV = `Environment:
${envLines([
  ['KMS_API_URL', 'service base URL ending in /api/v1 (or --url)'],
  ['KMS_API_KEY', 'project key, sk_live_… or sk_test_… (never a flag: it would land in shell history)'],
  ['NO_COLOR', 'no colours (same as --no-color)'],
])}`;

/**
 * The rest of what a command reads from the environment, by what it touches (a test checks each
 * name against the sources): the stores and their credentials, the operator policy, CI.
 */
const ENV_GROUPS = {
  target: [['KMS_SYNC_TARGET', 'one name for a service reached under several URLs (its secrets record it)']],
  stores: [
    [
      'SOPS_AGE_KEY_FILE, SOPS_AGE_KEY',
      'the age identity of store files and the journal (default ~/.config/sops/age/keys.txt)',
    ],
    ['VAULT_TOKEN, VAULT_NAMESPACE, VAULT_CACERT', 'Vault stores'],
    ['GITHUB_TOKEN (GH_TOKEN), GITLAB_TOKEN', 'GitHub and GitLab stores'],
    ['KUBECONFIG', 'Kubernetes stores (in a pod: its service account)'],
    ['AWS_*, GOOGLE_APPLICATION_CREDENTIALS, AZURE_*', "the cloud stores, through their SDKs' own credential chains"],
  ],
  policy: [
    ['KMS_SYNC_POLICY', 'the operator policy file (or --policy)'],
    ['KMS_SYNC_ENV_ALLOW', '${env:} variables a configuration may read (or --allow-env)'],
    [
      'KMS_SYNC_STORE_HOSTS, KMS_SYNC_STORE_CA_FILES, KMS_SYNC_RECIPIENTS, KMS_SYNC_STORES_OUTSIDE_ROOT',
      'more of the policy (docs/security.md)',
    ],
    [
      'KMS_SYNC_MAX_FILE_SIZE, KMS_SYNC_MAX_CONFIG_SIZE',
      'configuration size limits (or --max-file-size, --max-config-size)',
    ],
  ],
  planStores: [
    ['KMS_SYNC_PLAN_STORES', 'all, local or none: which stores a plan may contact (untrusted pull requests)'],
  ],
  configWhole: [
    ['KMS_SYNC_CONFIG_WHOLE', '1: load the configuration whole first (default: environment by environment)'],
  ],
  ci: [
    ['CI', 'a CI job: log lines instead of a progress line; keys into a local store file refused'],
    ['KMS_SYNC_ALLOW_LOCAL_STORE', '1: allow them anyway (or --allow-local-store)'],
  ],
  trustBase: [
    [
      'KMS_SYNC_TRUST_BASE',
      "git revision whose records security changes compare with (or --trust-base; in CI: the pull request's base)",
    ],
  ],
  newRecipients: [
    [
      'KMS_SYNC_ALLOW_NEW_RECIPIENTS',
      '1: a recipient may be added to a store that holds keys (or --allow-new-recipients)',
    ],
  ],
  applyHold: [
    [
      'KMS_SYNC_APPLY_HOLD_OPERATIONS',
      'plans larger than this (default 20000 operations) are applied environment by environment',
    ],
  ],
  comment: [['GITHUB_TOKEN, GITLAB_TOKEN', '--comment github|gitlab: post or update the pull-request comment']],
  agentRemote: [
    ['KMS_SYNC_AGENT_URL', "the agent's address (or --url; default http://127.0.0.1:8080)"],
    ['KMS_SYNC_UI_TOKEN', "the agent's token (or --token file:PATH|env:NAME; never the value as a flag)"],
  ],
} satisfies Record<string, [names: string, what: string][]>;

/** Names, then what they do in a column; names too long for it get a line of their own. */
function envLines(entries: readonly (readonly [string, string])[]): string {
  const column = 32;
  return entries
    .map(([names, what]) =>
      names.length <= column - 3 ? `  ${names.padEnd(column - 2)}${what}` : `  ${names}\n${' '.repeat(column)}${what}`,
    )
    .join('\n');
}
type EnvGroup = keyof typeof ENV_GROUPS;
const CONFIG_READERS: EnvGroup[] = ['target', 'stores', 'policy', 'planStores'];
const WRITERS: EnvGroup[] = ['target', 'stores', 'policy', 'ci', 'newRecipients'];

const EXIT_APPLY =
  'Exit codes: 0 done (or nothing to do), 1 error or cancelled, 3 stopped part-way or outcome unknown (see its Unresolved list), 130/143/141 interrupted (SIGINT, SIGTERM, closed output) before anything was written.';
const EXIT_PLAN = 'Exit codes: 0 success, 1 error; with --detailed-exitcode 2 when there are changes.';
const EXIT_DRIFT = 'Exit codes: 0 no drift, 2 drift found, 1 error.';
const EXIT_SIMPLE = 'Exit codes: 0 success, 1 error.';

interface HelpEntry {
  service: boolean;
  /** What else it reads from the environment (ENV_GROUPS). */
  env?: EnvGroup[];
  exit: string;
  examples: string[];
  /** Its page in docs/ (and heading): the last line of its help points there. */
  docs: string;
}

const ENTRIES: Record<string, HelpEntry> = {
  validate: {
    service: false,
    env: ['policy'],
    docs: 'cli.md#validate',
    exit: EXIT_SIMPLE,
    examples: [
      'kms-sync validate                 # kms-sync.yaml here or in a parent folder',
      'kms-sync validate -f config/',
    ],
  },
  init: {
    service: false,
    docs: 'cli.md#init',
    exit: EXIT_SIMPLE,
    examples: ['kms-sync init', 'kms-sync init config/kms-sync.yaml', 'kms-sync init - > team.yaml'],
  },
  plan: {
    service: true,
    env: [...CONFIG_READERS, 'configWhole', 'ci', 'trustBase', 'comment'],
    docs: 'cli.md#plan',
    exit: EXIT_PLAN,
    examples: ['kms-sync plan -f config/ --env "acme-*"', 'kms-sync plan --out plan.json && kms-sync apply plan.json'],
  },
  apply: {
    service: true,
    env: [...WRITERS, 'applyHold'],
    docs: 'cli.md#apply',
    exit: EXIT_APPLY,
    examples: [
      'kms-sync apply -f config/',
      'kms-sync apply plan.json          # a plan saved with plan --out',
      'kms-sync apply --json --yes | jq -c \'select(.type == "key_stored")\'',
    ],
  },
  rotate: {
    service: true,
    env: WRITERS,
    docs: 'cli.md#rotate',
    exit: EXIT_APPLY,
    examples: [
      'kms-sync rotate --key key.acme-production/globex/primary',
      'kms-sync rotate --key "key.acme-*/globex/*" --revoke-old --yes',
    ],
  },
  destroy: {
    service: true,
    env: ['target', 'policy', 'ci'],
    docs: 'cli.md#destroy',
    exit: EXIT_APPLY,
    examples: ['kms-sync destroy -f config/ --env acme-staging'],
  },
  show: {
    service: false,
    docs: 'cli.md#show',
    exit: EXIT_SIMPLE,
    examples: ['kms-sync show plan.json', 'kms-sync show plan.json --format markdown > plan.md'],
  },
  export: {
    service: true,
    docs: 'cli.md#export',
    exit: EXIT_SIMPLE,
    examples: [
      'kms-sync export > live.yaml                     # every environment the credential can see',
      'kms-sync export --env acme-production > acme.yaml',
      'kms-sync export --env acme-production --format cdktf -o stack/',
    ],
  },
  drift: {
    service: true,
    env: [...CONFIG_READERS, 'comment'],
    docs: 'drift-and-reports.md#drift',
    exit: EXIT_DRIFT,
    examples: ['kms-sync drift -f config/', 'kms-sync drift --format markdown --comment github'],
  },
  secrets: {
    service: false,
    env: ['target', 'stores', 'policy'],
    docs: 'cli.md#secrets',
    exit: EXIT_SIMPLE,
    examples: ['kms-sync secrets list -f config/', 'kms-sync secrets flush -f config/   # after an interrupted run'],
  },
  report: {
    service: false,
    env: ['comment'],
    docs: 'sharding.md',
    exit: EXIT_PLAN,
    examples: [
      'kms-sync report merge shard-*.json --format markdown --comment github',
      'kms-sync report merge drift-*.json --format markdown',
    ],
  },
  merge: {
    service: false,
    docs: 'sharding.md#merging-the-shards-plans',
    exit: 'Exit codes: 0 success, 1 error (a shard missing or twice, a blocked change); with --detailed-exitcode 2 when there are changes.',
    examples: [
      'kms-sync plan --shard 2/4 --json > shard-2.json   # in each of 4 jobs',
      'kms-sync report merge shard-*.json --format markdown --comment github --detailed-exitcode',
    ],
  },
  schema: {
    service: false,
    docs: 'cli.md#schema',
    exit: EXIT_SIMPLE,
    examples: ['kms-sync schema > kms-sync.schema.json'],
  },
  version: { service: false, docs: 'cli.md#version', exit: EXIT_SIMPLE, examples: ['kms-sync version'] },
  list: {
    service: false,
    env: ['target', 'stores', 'policy'],
    docs: 'cli.md#secrets',
    exit: EXIT_SIMPLE,
    examples: [
      'kms-sync secrets list -f config/',
      'kms-sync secrets list --json',
      'kms-sync secrets list --cdktf infra/   # the stores of a CDKTF app',
    ],
  },
  flush: {
    service: false,
    env: ['target', 'stores', 'policy'],
    docs: 'cli.md#secrets',
    exit: EXIT_SIMPLE,
    examples: ['kms-sync secrets flush -f config/'],
  },
  prune: {
    service: true,
    env: ['target', 'stores', 'policy'],
    docs: 'cli.md#secrets',
    exit: 'Exit codes: 0 removed (or nothing to remove), 1 error or cancelled.',
    examples: [
      'kms-sync secrets prune -f config/',
      'kms-sync secrets prune -f config/ --yes   # in a script: no question',
    ],
  },
  emulator: {
    service: false,
    docs: 'getting-started.md#the-emulator',
    exit: EXIT_SIMPLE,
    examples: [
      'KMS_EMULATOR_API_KEY=sk_test_local1234 kms-sync emulator --port 8080',
      'kms-sync emulator --api-key-file key.txt --data state.json',
    ],
  },
  provider: {
    service: false,
    docs: 'terraform-provider.md',
    exit: 'Exit codes: 0 when Terraform stops it, 1 error.',
    examples: ['kms-sync provider install          # then terraform init: Terraform starts the provider itself'],
  },
  install: {
    service: false,
    docs: 'terraform-provider.md#install',
    exit: EXIT_SIMPLE,
    examples: [
      'kms-sync provider install --print',
      'kms-sync provider install --from release/   # a packaged release (npm run package:provider): no Node.js needed',
      'kms-sync provider install --dev    # dev_overrides, for working on the provider',
    ],
  },
  demo: { service: false, docs: 'getting-started.md#quick-start', exit: EXIT_SIMPLE, examples: ['kms-sync demo'] },
  agent: {
    service: true,
    docs: 'agent.md',
    exit: 'Exit codes: 0 stopped by SIGTERM or SIGINT once the reconcile in flight finished, 1 error at start-up or a second signal.',
    examples: [
      'kms-sync agent --repo https://github.com/acme/platform.git --path kms --state-dir /var/lib/kms-sync --listen :8080',
      'kms-sync agent --repo file:///srv/git/kms.git --mode self-heal --interval 1m --state-dir ./state',
    ],
  },
  status: {
    service: false,
    env: ['agentRemote'],
    docs: 'agent.md#operating-a-running-agent',
    exit: 'Exit codes: 0 the agent is Ready (its last reconcile succeeded), 2 it answered but is not Ready (False or Unknown), 1 error (unreachable, token refused).',
    examples: [
      'kms-sync agent status --url http://kms-sync-agent:8080 --token file:/run/secrets/ui-token',
      'kms-sync agent status --json | jq .condition',
    ],
  },
  reconcile: {
    service: false,
    env: ['agentRemote'],
    docs: 'agent.md#operating-a-running-agent',
    exit: 'Exit codes: 0 the reconcile succeeded, 2 it did not (invalid revision, failed, locked) or the agent is suspended, 1 error (unreachable, token refused, --timeout passed).',
    examples: [
      'kms-sync agent reconcile --url http://kms-sync-agent:8080',
      'kms-sync agent reconcile --override-sync-window   # an emergency fix outside the sync windows',
    ],
  },
  suspend: {
    service: false,
    env: ['agentRemote'],
    docs: 'agent.md#operating-a-running-agent',
    exit: EXIT_SIMPLE,
    examples: ['kms-sync agent suspend --url http://kms-sync-agent:8080'],
  },
  resume: {
    service: false,
    env: ['agentRemote'],
    docs: 'agent.md#operating-a-running-agent',
    exit: EXIT_SIMPLE,
    examples: ['kms-sync agent resume --url http://kms-sync-agent:8080'],
  },
  completion: {
    service: false,
    docs: 'cli.md#completion',
    exit: EXIT_SIMPLE,
    examples: [
      'source <(kms-sync completion bash)',
      'kms-sync completion fish > ~/.config/fish/completions/kms-sync.fish',
    ],
  },
};

/** A page of the documentation (docs/PAGE#anchor, or README.md) as an absolute path into the package. */
export function docsLink(page: string): string {
  const [file, anchor] = page.split('#', 2) as [string, string | undefined];
  // The package root, found as model/package-files.ts does; importing that module here would pull
  // the bundle chunk it shares with the command modules into every start-up.
  let root = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(root, 'package.json')) && path.dirname(root) !== root) root = path.dirname(root);
  const abs = file === 'README.md' ? path.join(root, 'README.md') : path.join(root, 'docs', file);
  return anchor ? `${abs}#${anchor}` : abs;
}

export function optionDescription(this: Help, option: Parameters<Help['optionDescription']>[0]): string {
  return Help.prototype.optionDescription.call(this, option).replace(/ \(default: \[\]\)/, '');
}

/**
 * What follows a usage error: the command's usage line and where its help is, nothing more (the
 * whole help would push the error off the screen).
 */
export function usageHint(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) names.unshift(c.name());
  return `Usage: ${cmd.createHelp().commandUsage(cmd)}\nSee '${names.join(' ')} --help'.`;
}

/** Applies to every command registered so far (call after registering them). */
export function finishHelp(program: Command): void {
  const visit = (cmd: Command) => {
    cmd.configureHelp({ optionDescription });
    cmd.showHelpAfterError(usageHint(cmd));
    // "Error: …" like every other error of kms-sync (commander writes "error: …").
    cmd.configureOutput({ outputError: (text, write) => write(text.replace(/^error: /, 'Error: ')) });
    const entry = ENTRIES[cmd.name()];
    if (entry && cmd !== program) {
      const env = [
        entry.service ? SERVICE_ENV : `Environment:\n${envLines([['NO_COLOR', 'no colours (same as --no-color)']])}`,
        ...(entry.env ?? []).map((g) => envLines(ENV_GROUPS[g])),
      ].join('\n');
      const parts = [env, entry.exit, `Examples:\n${entry.examples.map((e) => `  ${e}`).join('\n')}`];
      // The docs ship in the package: the path is one a user can open wherever kms-sync is installed.
      cmd.addHelpText('after', () => `\n${[...parts, `Docs: ${docsLink(entry.docs)}`].join('\n\n')}`);
    }
    for (const sub of cmd.commands) visit(sub);
  };
  visit(program);
  program.addHelpText(
    'after',
    () =>
      `\n${SERVICE_ENV}\n\nRun kms-sync COMMAND --help for a command's options, exit codes and examples.\n\nDocs: ${docsLink('README.md')}`,
  );
}
