// Habits users bring from Terraform and decK, met before commander parses: a single-dash long flag
// (`-auto-approve`) gets the double-dash spelling, decK's command words point at ours, and
// `--no-color` works anywhere on the line (it sets NO_COLOR, which every renderer honours).

/** decK and Terraform command words that kms-sync spells differently. */
const COMMAND_HINTS: Record<string, string> = {
  dump: 'export (writes the live state as YAML: kms-sync export --env SLUG)',
  diff: 'plan (what apply would change), or drift for a report of every difference',
  sync: 'apply',
  refresh: 'plan (it always reads the live state)',
  output: 'secrets list',
  import: 'export, then apply with the exported file (existing resources are adopted)',
};

/** Short flags commander knows (a single dash followed by one letter, or these clusters). */
const SHORT = /^-[a-zA-Z]$/;

export interface HabitResult {
  /** The arguments to parse (habits that only change the environment are removed). */
  args: string[];
  /** A usage error to report instead of parsing. */
  error?: string;
}

export function applyHabits(args: readonly string[], env: NodeJS.ProcessEnv = process.env): HabitResult {
  const rest: string[] = [];
  for (const a of args) {
    if (a === '--') break;
    if (a === '--no-color' || a === '-no-color') {
      env.NO_COLOR = '1';
      continue;
    }
    rest.push(a);
  }
  const tail = args.slice(args.indexOf('--') === -1 ? args.length : args.indexOf('--'));
  const result = [...rest, ...tail];
  for (const a of rest) {
    if (a.startsWith('-') && !a.startsWith('--') && !SHORT.test(a) && /^-[a-z][a-z0-9-]+(=.*)?$/.test(a)) {
      const name = a.slice(1).split('=')[0]!;
      return { args: result, error: `unknown option ${a}: did you mean --${name}? (kms-sync spells long options with two dashes)` };
    }
  }
  const word = rest.find((a) => !a.startsWith('-'));
  if (word !== undefined && word === rest[0] && Object.hasOwn(COMMAND_HINTS, word)) {
    return { args: result, error: `kms-sync has no command "${word}": did you mean ${COMMAND_HINTS[word]}?` };
  }
  return { args: result };
}
