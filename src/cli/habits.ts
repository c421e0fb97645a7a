// Habits users bring from Terraform and decK, met before commander parses: a single-dash long flag
// (`-auto-approve`) gets the double-dash spelling when the command has that flag, a Terraform flag or
// command kms-sync has no equivalent for gets one line on how kms-sync differs, decK's command words
// point at ours, and `--no-color` works anywhere on the line (it sets NO_COLOR, which every renderer
// honours). A hint never names a flag or command that does not exist: each one lists what it
// suggests (`suggests`), and a test checks every entry against the full commander program.
import type { Command } from 'commander';
import { usageHint } from './help.js';

export interface Hint {
  /** One line: the kms-sync equivalent, or how kms-sync differs. */
  text: string;
  /** Every `kms-sync COMMAND [--flag]` the text names, checked by test/cli/habits.test.ts. */
  suggests: string[];
}

const NO_STATE =
  'kms-sync keeps no state file: every run reads the live service (kms-sync export writes it as YAML, kms-sync plan shows what differs)';

/** decK and Terraform command words that kms-sync spells differently, or does not have. */
export const COMMAND_HINTS: Record<string, Hint> = {
  dump: {
    text: 'did you mean export? (writes the live state as YAML: kms-sync export, or kms-sync export --env SLUG)',
    suggests: ['export', 'export --env'],
  },
  diff: {
    text: 'did you mean plan? (what apply would change), or kms-sync drift for a report of every difference',
    suggests: ['plan', 'drift'],
  },
  sync: { text: 'did you mean apply?', suggests: ['apply'] },
  reset: {
    text: 'did you mean destroy? (deletes what this configuration owns, after showing the plan)',
    suggests: ['destroy'],
  },
  ping: {
    text: 'kms-sync plan checks the connection and the project key first, and says which one fails',
    suggests: ['plan'],
  },
  refresh: { text: 'did you mean plan? (it always reads the live state)', suggests: ['plan'] },
  output: { text: 'did you mean secrets list? (the issued keys are in the secret stores)', suggests: ['secrets list'] },
  import: {
    text: 'did you mean export? Export the live state, then apply the exported file (existing resources are adopted)',
    suggests: ['export'],
  },
  state: { text: NO_STATE, suggests: ['export', 'plan'] },
  workspace: {
    text: 'kms-sync has no workspaces: one configuration covers many environments, and --env SLUG limits a run to some (kms-sync plan --env SLUG)',
    suggests: ['plan --env'],
  },
  taint: { text: 'to replace a key, rotate it: kms-sync rotate --key key.ENV/CLIENT/KEY', suggests: ['rotate --key'] },
  untaint: {
    text: 'kms-sync marks nothing for replacement: keys are replaced only by kms-sync rotate',
    suggests: ['rotate'],
  },
  fmt: { text: 'kms-sync has no formatter; kms-sync validate checks the files', suggests: ['validate'] },
  console: { text: 'kms-sync has no console; kms-sync export prints the live state as YAML', suggests: ['export'] },
  graph: {
    text: 'kms-sync has no graph output; kms-sync plan lists the changes in the order apply makes them',
    suggests: ['plan'],
  },
  login: {
    text: 'kms-sync takes its credential from the KMS_API_KEY environment variable, never from a login',
    suggests: [],
  },
  logout: { text: 'kms-sync stores no credential: unset KMS_API_KEY', suggests: [] },
  'force-unlock': {
    text: 'a run lock whose process died is broken by the next run on its own; --lock-timeout waits for a live one (kms-sync apply --lock-timeout 5m)',
    suggests: ['apply --lock-timeout'],
  },
  providers: {
    text: 'kms-sync is itself the provider: kms-sync provider is what Terraform starts',
    suggests: ['provider'],
  },
  get: { text: 'kms-sync has no modules to fetch', suggests: [] },
  lint: {
    text: 'did you mean validate? (syntax, schema, references and duplicates, offline: kms-sync validate)',
    suggests: ['validate'],
  },
  check: {
    text: 'did you mean validate? (offline), or kms-sync plan against the service',
    suggests: ['validate', 'plan'],
  },
  // Flux's and Argo CD's words: one reconcile is an apply; a running agent is asked with agent reconcile.
  reconcile: {
    text: 'did you mean apply? (plans and converges once), or kms-sync agent reconcile to make a running agent reconcile now',
    suggests: ['apply', 'agent reconcile'],
  },
};

/** Terraform flags, met on a command that has no flag of that name. */
export const FLAG_HINTS: Record<string, Hint> = {
  'var-file': {
    text: 'kms-sync has no variables: the configuration reads ${env:NAME} from the environment; see docs/configuration.md',
    suggests: [],
  },
  var: {
    text: 'kms-sync has no variables: the configuration reads ${env:NAME} from the environment; see docs/configuration.md',
    suggests: [],
  },
  input: {
    text: 'kms-sync never asks for values; it asks only to confirm changes, and without a terminal it refuses instead of waiting (kms-sync apply --auto-approve in CI)',
    suggests: ['apply --auto-approve'],
  },
  target: {
    text: 'limit a run to environments with --env SLUG (globs allowed), or rotate single keys with kms-sync rotate --key ADDRESS',
    suggests: ['plan --env', 'apply --env', 'rotate --key'],
  },
  replace: {
    text: 'to replace a key, rotate it: kms-sync rotate --key key.ENV/CLIENT/KEY',
    suggests: ['rotate --key'],
  },
  destroy: {
    text: 'deleting is a command of its own: kms-sync destroy (it shows what goes and asks first)',
    suggests: ['destroy'],
  },
  'refresh-only': {
    text: 'kms-sync always reads the live state; kms-sync drift reports every difference without changing anything',
    suggests: ['drift'],
  },
  refresh: { text: 'kms-sync always reads the live state, there is nothing to refresh', suggests: [] },
  upgrade: {
    text: 'kms-sync has no providers or modules to install or upgrade; kms-sync init only writes a starter configuration',
    suggests: ['init'],
  },
  reconfigure: { text: NO_STATE, suggests: ['export', 'plan'] },
  backend: { text: NO_STATE, suggests: ['export', 'plan'] },
  'backend-config': { text: NO_STATE, suggests: ['export', 'plan'] },
  'migrate-state': { text: NO_STATE, suggests: ['export', 'plan'] },
  state: { text: NO_STATE, suggests: ['export', 'plan'] },
  'state-out': { text: NO_STATE, suggests: ['export', 'plan'] },
  json: {
    text: 'this command prints no JSON; kms-sync plan --json and kms-sync apply --json do',
    suggests: ['plan --json', 'apply --json'],
  },
  'auto-approve': {
    text: 'only commands that change something ask first: kms-sync apply --auto-approve, kms-sync destroy --auto-approve',
    suggests: ['apply --auto-approve', 'destroy --auto-approve'],
  },
  chdir: { text: 'give the configuration with -f PATH instead', suggests: [] },
  'compact-warnings': { text: 'kms-sync prints each warning once, on stderr', suggests: [] },
  'detailed-exitcode': {
    text: 'kms-sync plan --detailed-exitcode exits 2 when there are changes',
    suggests: ['plan --detailed-exitcode'],
  },
  out: {
    text: 'only a plan is saved: kms-sync plan --out FILE, then kms-sync apply FILE',
    suggests: ['plan --out', 'apply'],
  },
  parallelism: { text: 'this command sends no requests in parallel', suggests: [] },
  lock: {
    text: 'only commands that write take the run lock (kms-sync apply --no-lock)',
    suggests: ['apply --no-lock'],
  },
  'lock-timeout': {
    text: 'only commands that write take the run lock (kms-sync apply --lock-timeout 5m)',
    suggests: ['apply --lock-timeout'],
  },
};

/** Short flags commander knows (a single dash followed by one letter). */
const SHORT = /^-[a-zA-Z]$/;

export interface HabitResult {
  /** The arguments to parse (habits that only change the environment are removed). */
  args: string[];
  /** A usage error to report instead of parsing (the usage line and where help is included). */
  error?: string;
}

/** The command `args` runs in `program` (`secrets list` included), or the program itself. */
function targetCommand(program: Command, words: readonly string[]): Command {
  let cmd = program;
  for (const w of words) {
    const sub = cmd.commands.find((c) => c.name() === w || c.aliases().includes(w));
    if (!sub) break;
    cmd = sub;
  }
  return cmd;
}

function hasLong(cmd: Command, long: string): boolean {
  if (long === '--help' || long === '--no-color') return true;
  for (let c: Command | null = cmd; c; c = c.parent) if (c.options.some((o) => o.long === long)) return true;
  return false;
}

function fullName(cmd: Command): string {
  const names: string[] = [];
  for (let c: Command | null = cmd; c; c = c.parent) names.unshift(c.name());
  return names.join(' ');
}

/**
 * `program` is the commander program that will parse `args` (commands.ts buildProgram): flags are
 * checked against the options of the command named in `args`.
 */
export function applyHabits(
  args: readonly string[],
  program: Command,
  env: NodeJS.ProcessEnv = process.env,
): HabitResult {
  const end = args.indexOf('--') === -1 ? args.length : args.indexOf('--');
  const rest: string[] = [];
  for (const a of args.slice(0, end)) {
    if (a === '--no-color' || a === '-no-color') {
      env.NO_COLOR = '1';
      continue;
    }
    rest.push(a);
  }
  const result = [...rest, ...args.slice(end)];
  const word = rest.find((a) => !a.startsWith('-'));
  const known = word !== undefined && program.commands.some((c) => c.name() === word);
  if (word !== undefined && word === rest[0] && !known && Object.hasOwn(COMMAND_HINTS, word)) {
    return {
      args: result,
      error: `kms-sync has no command "${word}": ${COMMAND_HINTS[word]!.text}\n${usageHint(program)}`,
    };
  }
  const cmd = targetCommand(
    program,
    rest.filter((a) => !a.startsWith('-')),
  );
  const name = fullName(cmd);
  for (const a of rest) {
    const m = /^(--?)([a-z][a-z0-9-]+)(=.*)?$/.exec(a);
    if (!m || SHORT.test(a)) continue;
    const [, dashes, flag, value] = m as unknown as [string, string, string, string | undefined];
    if (dashes === '--' && hasLong(cmd, `--${flag}`)) continue;
    if (dashes === '-') {
      // Terraform's -lock=false is kms-sync's --no-lock.
      const negated = value === '=false' && hasLong(cmd, `--no-${flag}`) ? `--no-${flag}` : undefined;
      const spelled = negated ?? (hasLong(cmd, `--${flag}`) ? `--${flag}` : undefined);
      if (spelled)
        return {
          args: result,
          error: `unknown option ${a}: did you mean ${spelled}? (kms-sync spells long options with two dashes)\n${usageHint(cmd)}`,
        };
    }
    if (Object.hasOwn(FLAG_HINTS, flag)) {
      return {
        args: result,
        error: `${name} has no ${dashes}${flag} option: ${FLAG_HINTS[flag]!.text}\n${usageHint(cmd)}`,
      };
    }
    if (dashes === '-') {
      return {
        args: result,
        error: `unknown option ${a} (${name} has no --${flag}; kms-sync spells long options with two dashes)\n${usageHint(cmd)}`,
      };
    }
  }
  return { args: result };
}
