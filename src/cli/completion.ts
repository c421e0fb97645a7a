// `kms-sync completion bash|zsh|fish`: a completion script generated from the registered commands
// and their options, so it never falls behind the CLI.
import type { Command } from 'commander';

interface Entry {
  /** `secrets list` for nested commands. */
  path: string[];
  description: string;
  /** `values`: what the option takes (its choices); empty: a value of any kind (file names are offered). */
  options: { long: string; description: string; values?: string[] }[];
}

function entries(program: Command): Entry[] {
  const list: Entry[] = [];
  const visit = (cmd: Command, prefix: string[]) => {
    for (const sub of cmd.commands) {
      const p = [...prefix, sub.name()];
      list.push({
        path: p,
        description: sub.description(),
        options: sub.options
          .filter((o) => o.long)
          .map((o) => ({
            long: o.long!,
            description: o.description,
            ...(o.required || o.optional ? { values: [...(o.argChoices ?? [])] } : {}),
          })),
      });
      visit(sub, p);
    }
  };
  visit(program, []);
  return list;
}

const shellWord = (s: string) => s.replace(/[^A-Za-z0-9_-]/g, '_');
const fishQuote = (s: string) => `'${s.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;

function bash(program: Command): string {
  const list = entries(program);
  const top = list
    .filter((e) => e.path.length === 1)
    .map((e) => e.path[0])
    .join(' ');
  const cases = list.map((e) => {
    const subs = list
      .filter((x) => x.path.length === e.path.length + 1 && x.path.slice(0, -1).join(' ') === e.path.join(' '))
      .map((x) => x.path.at(-1));
    return `    "${e.path.join(' ')}") words="${[...subs, ...e.options.map((o) => o.long), '--help'].join(' ')}" ;;`;
  });
  // After an option that takes a value: its choices (--format <TAB>), else file names (-o default).
  const values = list.flatMap((e) =>
    e.options
      .filter((o) => o.values)
      .map((o) => `    "${e.path.join(' ')}|${o.long}") words="${o.values!.join(' ')}" ;;`),
  );
  return `# kms-sync completion for bash: source <(kms-sync completion bash)
_kms_sync() {
  local cur="\${COMP_WORDS[COMP_CWORD]}" path="" i words
  for ((i = 1; i < COMP_CWORD; i++)); do
    case "\${COMP_WORDS[i]}" in -*) ;; *) if [ -z "$path" ]; then path="\${COMP_WORDS[i]}"; elif [ "$path" = secrets ]; then path="$path \${COMP_WORDS[i]}"; fi ;; esac
  done
  case "$path|\${COMP_WORDS[COMP_CWORD-1]}" in
${values.join('\n')}
    *) words="-" ;;
  esac
  if [ "$words" != "-" ]; then
    COMPREPLY=($(compgen -W "$words" -- "$cur"))
    return
  fi
  case "$path" in
    "") words="${top} --help --version --no-color" ;;
${cases.join('\n')}
    *) words="" ;;
  esac
  COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _kms_sync kms-sync
`;
}

function zsh(program: Command): string {
  return `#compdef kms-sync
# kms-sync completion for zsh: source <(kms-sync completion zsh)  (uses zsh's bash completion layer)
autoload -U +X bashcompinit && bashcompinit
${bash(program).split('\n').slice(1).join('\n')}`;
}

function fish(program: Command): string {
  const lines = [
    '# kms-sync completion for fish: kms-sync completion fish > ~/.config/fish/completions/kms-sync.fish',
    'complete -c kms-sync -f',
  ];
  for (const e of entries(program)) {
    const name = e.path.at(-1)!;
    const cond =
      e.path.length === 1
        ? '__fish_use_subcommand'
        : `__fish_seen_subcommand_from ${e.path.slice(0, -1).map(shellWord).join(' ')}`;
    lines.push(
      `complete -c kms-sync -n ${fishQuote(cond)} -a ${shellWord(name)} -d ${fishQuote(e.description.slice(0, 80))}`,
    );
    for (const o of e.options) {
      // A value: its choices (-x: those only), else a file name (-r -F).
      const takes = !o.values ? '' : o.values.length ? ` -x -a ${fishQuote(o.values.join(' '))}` : ' -r -F';
      lines.push(
        `complete -c kms-sync -n ${fishQuote(`__fish_seen_subcommand_from ${shellWord(name)}`)} -l ${o.long.slice(2)}${takes} -d ${fishQuote(o.description.slice(0, 80))}`,
      );
    }
  }
  return `${lines.join('\n')}\n`;
}

export function completionScript(shell: string, program: Command): string {
  if (shell === 'bash') return bash(program);
  if (shell === 'zsh') return zsh(program);
  if (shell === 'fish') return fish(program);
  throw Object.assign(new Error(`completion: unknown shell ${JSON.stringify(shell)}; expected bash, zsh or fish`), {
    exitCode: 1,
  });
}
