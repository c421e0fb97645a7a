// Habits from Terraform and decK, each through the CLI as a process: spellings, command words,
// the default configuration file, saved plans, flag errors that name the flag, help text.
import { execFile } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { lookup } from 'node:dns/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allOutput, RAW_KEY_PATTERN, runCli } from '../support/cli.js';
import { setup, smallConfig, type Setup } from './helpers.js';
import { buildFullProgram } from '../../src/cli/commands.js';
import { COMMAND_HINTS, FLAG_HINTS } from '../../src/cli/habits.js';
import { savedPlanFromFile } from '../../src/cli/saved-plan.js';
import { skipTest } from '../support/skip.js';

let s: Setup;
beforeAll(async () => {
  s = await setup({ 'kms-sync.yaml': smallConfig, 'sub/deeper/.keep': '' });
});
afterAll(async () => {
  await s?.emu.close();
  for (const text of allOutput) expect(text).not.toMatch(RAW_KEY_PATTERN);
});

const cli = (args: string[], opts: { cwd?: string; env?: NodeJS.ProcessEnv } = {}) =>
  runCli(args, { cwd: opts.cwd ?? s.dir, env: opts.env ?? s.env });

describe('spellings and command words', () => {
  it('single-dash Terraform spellings get the double-dash one', async () => {
    for (const [cmd, arg, hint] of [
      ['apply', '-auto-approve', '--auto-approve'],
      ['apply', '-json', '--json'],
      ['plan', '-out=plan.json', '--out'],
    ] as const) {
      const r = await cli([cmd, arg]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`unknown option ${arg}: did you mean ${hint}?`);
    }
  });

  it("decK's dump/diff/sync point at export/plan/apply", async () => {
    for (const [word, ours] of [
      ['dump', 'export'],
      ['diff', 'plan'],
      ['sync', 'apply'],
    ] as const) {
      const r = await cli([word]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(`kms-sync has no command "${word}": did you mean ${ours}`);
    }
  });

  it('kms-sync version and --version print the version', async () => {
    expect((await cli(['version'])).stdout).toBe('kms-sync 0.1.0\n');
    expect((await cli(['--version'])).stdout).toBe('0.1.0\n');
  });

  it('--yes is --auto-approve, and --no-color works after the command', async () => {
    const r = await cli(['apply', '--yes', '--no-color'], { env: { ...s.env, FORCE_COLOR: '1' } });
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('Apply complete!');
    expect(r.stdout).not.toContain('\x1b[');
  });
});

describe('hints point only at what exists', () => {
  it('every command and flag a hint suggests exists in the program, and the text names nothing else', async () => {
    const program = await buildFullProgram();
    const hints = [...Object.entries(COMMAND_HINTS), ...Object.entries(FLAG_HINTS)];
    expect(hints.length).toBeGreaterThan(30);
    for (const [name, hint] of hints) {
      for (const suggestion of hint.suggests) {
        let cmd = program;
        const words = suggestion.split(' ');
        for (const w of words.filter((x) => !x.startsWith('-'))) {
          const sub = cmd.commands.find((c) => c.name() === w);
          expect(sub, `${name}: kms-sync ${suggestion}`).toBeDefined();
          cmd = sub!;
        }
        for (const flag of words.filter((x) => x.startsWith('--')))
          expect(
            cmd.options.map((o) => o.long),
            `${name}: kms-sync ${suggestion}`,
          ).toContain(flag);
      }
      // Every "kms-sync WORD" and "--flag" in the text is one of the suggestions checked above.
      // (A word after "kms-sync" that is no command is prose: "kms-sync has no …", never a command word we hint about.)
      for (const m of hint.text.matchAll(/kms-sync ([a-z-]+)/g)) {
        expect(
          Object.hasOwn(COMMAND_HINTS, m[1]!) && !program.commands.some((c) => c.name() === m[1]),
          `${name}: ${m[0]}`,
        ).toBe(false);
        if (program.commands.some((c) => c.name() === m[1]))
          expect(
            hint.suggests.some((x) => x === m[1] || x.startsWith(`${m[1]} `)),
            `${name}: ${m[0]}`,
          ).toBe(true);
      }
      for (const m of hint.text.matchAll(/--[a-z-]+/g)) {
        if (m[0] === '--env' || m[0] === '--help') continue; // shared by every command that reads a configuration
        expect(
          hint.suggests.some((x) => x.split(' ').includes(m[0])),
          `${name}: ${m[0]}`,
        ).toBe(true);
      }
    }
  });

  it("Terraform's flags and commands get one line on how kms-sync differs, never a flag that does not exist", async () => {
    const cases: [string[], string][] = [
      [['plan', '-var-file=prod.tfvars'], 'reads ${env:NAME}'],
      [['plan', '--var-file', 'prod.tfvars'], 'reads ${env:NAME}'],
      [['apply', '-input=false'], 'never asks for values'],
      [['plan', '-target=client.x'], '--env SLUG'],
      [['init', '-upgrade'], 'no providers or modules'],
      [['validate', '-json'], 'this command prints no JSON'],
      [['plan', '-auto-approve'], 'kms-sync apply --auto-approve'],
      [['state', 'list'], 'keeps no state file'],
      [['workspace', 'list'], 'no workspaces'],
      [['lint'], 'did you mean validate?'],
      [['reconcile'], 'did you mean apply?'],
    ];
    for (const [args, hint] of cases) {
      const r = await cli(args);
      expect(r.code, args.join(' ')).toBe(1);
      expect(r.stderr, args.join(' ')).toContain(hint);
      expect(r.stderr, args.join(' ')).not.toMatch(
        /did you mean --(var-file|input|target|upgrade|json)\b|Did you mean rotate/,
      );
    }
    const lock = await cli(['apply', '-lock=false']);
    expect(lock.stderr).toContain('did you mean --no-lock?');
  });

  it('a usage error prints the error, the usage line and where the help is: nothing more', async () => {
    for (const [args, usage] of [
      [['plan', '--format', 'yaml'], 'Usage: kms-sync plan [options]'],
      [['plan', '--parallelism', '0'], 'Usage: kms-sync plan [options]'],
      [['apply', '--bogus'], 'Usage: kms-sync apply [options] [planfile]'],
      [['completion'], 'Usage: kms-sync completion [options] <shell>'],
      [['secrets', 'list', '-json'], 'Usage: kms-sync secrets list [options]'],
      [['plan', '-var-file=x'], 'Usage: kms-sync plan [options]'],
    ] as const) {
      const r = await cli([...args]);
      expect(r.code, args.join(' ')).toBe(1);
      const lines = r.stderr.trimEnd().split('\n');
      expect(lines, args.join(' ')).toHaveLength(3);
      expect(lines[0]).toMatch(/^Error: /);
      expect(lines[1]).toBe(usage);
      expect(lines[2]).toBe(`See '${usage.replace(/^Usage: /, '').replace(/ \[options\].*$/, '')} --help'.`);
    }
  });
});

describe('default configuration file', () => {
  it('with no -f, reads kms-sync.yaml here, or in the nearest parent folder (and says which)', async () => {
    const here = await cli(['validate']);
    expect(here.code, here.stderr).toBe(0);
    expect(here.stdout).toContain('2 client(s)');
    const below = await cli(['plan', '--detailed-exitcode'], { cwd: path.join(s.dir, 'sub', 'deeper') });
    expect(below.code, below.stderr).toBe(0);
    expect(below.stderr).toContain(`Using the configuration ${path.join('..', '..', 'kms-sync.yaml')}`);
  });

  it('with none anywhere, the error names -f and kms-sync init', async () => {
    const r = await runCli(['validate'], { cwd: '/', env: {} });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('no configuration given: use -f');
    expect(r.stderr).toContain('kms-sync init');
  });
});

describe('saved plans', () => {
  it('show prints a saved plan as text, JSON and Markdown without contacting the service', async () => {
    writeFileSync(path.join(s.dir, 'kms-sync.yaml'), smallConfig.replace('rateLimitDay: 10', 'rateLimitDay: 20'));
    const saved = await cli(['plan', '--out', 'plan.json']);
    expect(saved.code, saved.stderr).toBe(0);
    const offline = { KMS_API_URL: 'http://127.0.0.1:9/api/v1' };
    const text = await cli(['show', 'plan.json'], { env: offline });
    expect(text.code, text.stderr).toBe(0);
    expect(text.stdout).toContain('template.shop-staging/std');
    expect(text.stdout).toContain('kms-sync apply plan.json');
    const json = await cli(['show', 'plan.json', '--json'], { env: offline });
    expect(JSON.parse(json.stdout).resource_changes.map((c: { address: string }) => c.address)).toContain(
      'template.shop-staging/std',
    );
    const md = await cli(['show', 'plan.json', '--format', 'markdown'], { env: offline });
    expect(md.stdout).toMatch(/^#+ /m);
    expect(md.stdout).toContain('template.shop-staging/std');
    const both = await cli(['show', 'plan.json', '--json', '--format', 'text'], { env: offline });
    expect(both.code).toBe(1);
  });

  it('-f, --env or --prune next to a plan file is a usage error, not a silent "Nothing to do"', async () => {
    for (const extra of [['-f', 'kms-sync.yaml'], ['--env', 'shop-staging'], ['--prune']]) {
      const r = await cli(['apply', 'plan.json', ...extra]);
      expect(r.code).toBe(1);
      expect(r.stderr).toContain(
        `${extra[0] === '-f' ? '-f/--file' : extra[0]} cannot be used with a saved plan (plan.json)`,
      );
      expect(r.stdout).not.toContain('Nothing to do');
    }
    // The plan itself still applies.
    const r = await cli(['apply', 'plan.json']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toContain('template.shop-staging/std');
  });

  it('a saved plan names its fields in snake_case like plan --json; a format-1 (camelCase) plan still shows and applies', async () => {
    writeFileSync(path.join(s.dir, 'kms-sync.yaml'), smallConfig.replace('rateLimitDay: 10', 'rateLimitDay: 30'));
    expect((await cli(['plan', '--out', 'snake.json'])).code).toBe(0);
    const file = JSON.parse(readFileSync(path.join(s.dir, 'snake.json'), 'utf8'));
    expect(file).toMatchObject({
      kind: 'kms-sync/saved-plan',
      format_version: 2,
      config_dir: '.',
      local_stores: expect.any(Array),
    });
    expect(file.plan).toMatchObject({ format_version: 1, generated_at: expect.any(String), key_findings: [] });
    const op = file.plan.operations.find((o: { address: string }) => o.address === 'template.shop-staging/std');
    expect(op).toMatchObject({ action_reason: expect.any(String), project_env: 'shop-staging' });
    // No camelCase name of the format anywhere, except inside the values (before/after: the configuration's own names).
    const names = (v: unknown, data = false): string[] =>
      Array.isArray(v)
        ? v.flatMap((x) => names(x, data))
        : v && typeof v === 'object'
          ? Object.entries(v).flatMap(([k, x]) => [
              ...(data ? [] : [k]),
              ...names(x, data || ['before', 'after', 'changes', 'fingerprints', 'stores', 'settings'].includes(k)),
            ])
          : [];
    expect(names(file).filter((k) => /[A-Z]/.test(k))).toEqual([]);
    // The same plan written the 1.0 way (camelCase, no format_version) is read as before.
    const old = savedPlanFromFile(file, 'snake.json');
    expect(old.plan.operations.find((o) => o.address === op.address)!.actionReason).toBe(op.action_reason);
    writeFileSync(path.join(s.dir, 'camel.json'), JSON.stringify(old));
    expect(JSON.parse(readFileSync(path.join(s.dir, 'camel.json'), 'utf8')).baseDir).toBe(s.dir);
    const shown = await cli(['show', 'camel.json']);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain('template.shop-staging/std');
    const applied = await cli(['apply', 'camel.json']);
    expect(applied.code, applied.stderr).toBe(0);
    expect(applied.stdout).toContain('Apply complete!');
    writeFileSync(path.join(s.dir, 'future.json'), JSON.stringify({ ...file, format_version: 3 }));
    expect((await cli(['show', 'future.json'])).stderr).toContain('saved by a newer kms-sync (saved-plan format 3)');
  });
});

describe('flag errors name the flag', () => {
  it('rotate without --key says the flag is required', async () => {
    const r = await cli(['rotate']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("required option '--key <address>' not specified");
  });

  it('a bad --parallelism names --parallelism', async () => {
    const r = await cli(['plan', '--parallelism', '0']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain("option '--parallelism <n>' argument '0' is invalid");
  });

  it('an address without its kind prefix, or of another kind, gets the address meant', async () => {
    const bare = await cli(['rotate', '--key', 'shop-staging/web/main']);
    expect(bare.code).toBe(1);
    expect(bare.stderr).toContain('did you mean --key key.shop-staging/web/main?');
    const client = await cli(['rotate', '--key', 'client.shop-staging/web']);
    expect(client.stderr).toContain('Did you mean --key "key.shop-staging/web/*"');
    const typo = await cli(['rotate', '--key', 'key.shop-staging/wbe/main']);
    expect(typo.code).toBe(1);
    expect(typo.stderr).toContain('matches no existing managed key: did you mean --key key.shop-staging/web/main?');
    // The suggestion works.
    const meant = await cli(['rotate', '--key', 'key.shop-staging/web/main', '--yes']);
    expect(meant.code, meant.stderr).toBe(0);
    expect(meant.stdout).toContain('key.shop-staging/web/main');
  });

  it('export without --env exports every environment the credential can see (like decK dump)', async () => {
    const r = await cli(['export']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain('Exporting every environment the credential can see (1): shop-staging');
    expect(r.stdout).toContain('slug: shop');
    expect(r.stdout).toContain('name: web');
  });

  it('export of an unknown environment lists the known ones', async () => {
    const r = await cli(['export', '--env', 'shop-prod']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('not found in the live service: shop-prod. Known environments: shop-staging');
  });

  it('a KMS_API_KEY that is not a project key is refused before anything is sent', async () => {
    const r = await cli(['plan'], {
      env: { ...s.env, KMS_API_URL: 'http://127.0.0.1:9/api/v1', KMS_API_KEY: 'kmsc_notaprojectkey' },
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('KMS_API_KEY is not a project key');
    expect(r.stderr).not.toMatch(/ECONNREFUSED|retrying/);
  });
});

describe('network', () => {
  it('a service host that does not resolve fails at once: no retries (checked when this machine resolves .invalid as NXDOMAIN)', async (ctx) => {
    const code = await lookup('kms-sync-test.invalid').then(
      () => 'resolved',
      (e: NodeJS.ErrnoException) => e.code,
    );
    if (code !== 'ENOTFOUND')
      return skipTest(ctx, `the DNS test: the resolver answers ${code} for .invalid here (no DNS), not ENOTFOUND`);
    const r = await cli(['plan'], { env: { ...s.env, KMS_API_URL: 'http://kms-sync-test.invalid/api/v1' } });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('does not resolve');
    expect(r.stderr).not.toContain('retrying');
  });
});

describe('completion', () => {
  it("bash completion completes commands, a command's options and nested commands (run in bash)", async () => {
    const script = await cli(['completion', 'bash']);
    expect(script.code).toBe(0);
    const file = path.join(s.dir, 'completion.bash');
    writeFileSync(file, script.stdout);
    const complete = (words: string[]) =>
      new Promise<string>((resolve, reject) => {
        execFile(
          'bash',
          [
            '-c',
            `source "$1"; COMP_WORDS=(${words.map((w) => `'${w}'`).join(' ')}); COMP_CWORD=${words.length - 1}; _kms_sync; echo "\${COMPREPLY[*]}"`,
            'bash',
            file,
          ],
          (error, stdout) => (error ? reject(error) : resolve(stdout.trim())),
        );
      });
    expect(await complete(['kms-sync', 'ap'])).toBe('apply');
    expect((await complete(['kms-sync', 'apply', '--au'])).split(' ')).toEqual(['--auto-approve']);
    expect(await complete(['kms-sync', 'plan', '--lock'])).toBe('');
    expect(await complete(['kms-sync', 'secrets', 'l'])).toBe('list');
    expect(await complete(['kms-sync', 'secrets', 'list', '--j'])).toBe('--json');
    // An option's values: its choices, whatever came before it; else (a file) nothing of ours.
    expect(await complete(['kms-sync', 'plan', '--format', ''])).toBe('text json markdown');
    expect(await complete(['kms-sync', 'drift', '-f', 'config/', '--format', 'm'])).toBe('markdown');
    expect(await complete(['kms-sync', 'plan', '--out', ''])).toBe('');
  });

  it('zsh and fish scripts name every command; an unknown shell is an error', async () => {
    const zsh = await cli(['completion', 'zsh']);
    expect(zsh.stdout).toContain('#compdef kms-sync');
    expect(zsh.stdout).toContain('complete -o default -F _kms_sync kms-sync');
    const fish = await cli(['completion', 'fish']);
    for (const c of ['plan', 'apply', 'rotate', 'destroy', 'show', 'export', 'drift', 'version'])
      expect(fish.stdout).toContain(`-a ${c} `);
    expect(fish.stdout).toContain("-n '__fish_seen_subcommand_from apply' -l auto-approve");
    expect(fish.stdout).toContain("-n '__fish_seen_subcommand_from plan' -l format -x -a 'text json markdown'");
    const bad = await cli(['completion', 'tcsh']);
    expect(bad.code).toBe(1);
    expect(bad.stderr).toContain('expected bash, zsh or fish');
  });
});

describe('help', () => {
  // Every command's help names the environment, exit codes and examples, without "(default: [])":
  // checked in test/docs/help-and-errors.test.ts, on its walk through every command's help.

  it('read-only commands do not describe --parallelism as write requests', async () => {
    for (const cmd of ['export', 'drift']) expect((await cli([cmd, '--help'])).stdout).not.toContain('write requests');
  });
});
