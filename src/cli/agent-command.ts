// kms-sync agent: the long-running, pull-based reconciler (src/agent/). Flags say what to watch and
// how to act; every secret (the service's key, webhook secrets, the UI token, git and notification
// tokens) comes from the environment or a file, never from a flag that `ps` would show.
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { InvalidArgumentError, Option, type Command } from 'commander';
import { EXPOSABLE, loopbackHost, type AccessPolicy, type Exposable } from '../agent/access.js';
import { startAgent, stateLayout } from '../agent/agent.js';
import { loadSystemdCredentials } from '../agent/credentials.js';
import { limitsOf } from './config-limits.js';
import { createLogger } from '../agent/log.js';
import { AgentMetrics } from '../agent/metrics.js';
import { Notifier, type NotifierOptions } from '../agent/notify.js';
import { parseSyncWindow, SyncWindowError } from '../agent/windows.js';
import { parseTtl } from '../model/index.js';
import { connect } from '../engine/run.js';
import { PolicyError, readOperatorPolicy } from '../config/policy.js';
import { UsageError } from './errors.js';
import { readToken } from './token-source.js';
import { registerAgentRemote } from './agent-remote-command.js';
import { unsafeStateDirReason } from './state-dir.js';

interface AgentFlags {
  repo: string;
  ref?: string;
  path: string;
  cdktf?: boolean;
  maxFileSize?: string;
  maxConfigSize?: string;
  interval: string;
  mode: 'detect' | 'sync' | 'self-heal';
  prune?: boolean;
  pruneUnmanaged?: boolean;
  maxDeletes: number;
  suspend?: boolean;
  listen: string;
  stateDir: string;
  logFormat: 'text' | 'json';
  uiToken?: string;
  metricsAuth?: boolean;
  expose: string[];
  allowedHost: string[];
  url?: string;
  parallelism: number;
  maxRps?: number;
  lockTimeout: string;
  commitStatus?: 'github' | 'gitlab';
  statusRepo?: string;
  pageUrl?: string;
  syncWindow: string[];
  stuckTimeout: string;
  gitTimeout: string;
  verifyCommits?: string;
  allowEmpty?: boolean;
  policy?: string;
  allowEnv: string[];
  allowNewRecipients?: boolean;
}

const nonNegativeInt = (v: string) => {
  if (!/^\d+$/.test(v)) throw new InvalidArgumentError(`expected a whole number, got ${JSON.stringify(v)}`);
  return Number(v);
};

const positiveInt = (v: string) => {
  if (!/^[1-9]\d*$/.test(v)) throw new InvalidArgumentError(`expected a positive integer, got ${JSON.stringify(v)}`);
  return Number(v);
};

function duration(flag: string, v: string): number {
  try {
    return parseTtl(v);
  } catch {
    throw new UsageError(`${flag}: expected a duration such as 30s, 5m or 1h, got ${JSON.stringify(v)}`);
  }
}

/** `host:port`, `:port` (all interfaces) or `[v6]:port`. */
export function parseListen(v: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:]*)):(\d{1,5})$/.exec(v.trim());
  const port = m ? Number(m[3]) : NaN;
  if (!m || port > 65535)
    throw new UsageError(`--listen: expected HOST:PORT such as 127.0.0.1:8080 or :8080, got ${JSON.stringify(v)}`);
  return { host: m[1] ?? (m[2] || '0.0.0.0'), port };
}

/**
 * Why a --repo URL is refused for the user info it carries, or undefined. A token before the `@`
 * (`https://TOKEN@host/…`, `https://user:TOKEN@…`) would be visible in `ps` and kept in the
 * checkout's .git/config; ssh names its login user there (`ssh://git@host/…`, `git@host:…`), which is
 * no secret, so a user name without a password is allowed for ssh only.
 */
export function repoUserInfoProblem(repo: string): string | undefined {
  const m = /^([a-z][a-z0-9+.-]*):\/\/([^/?#]*)@/i.exec(repo.trim());
  if (!m) return undefined;
  const ssh = /^(ssh|git\+ssh|ssh\+git)$/i.test(m[1]!);
  if (ssh && !m[2]!.includes(':')) return undefined;
  return `--repo ${m[1]}://…@: the URL holds user info (a token or a password); put an https token in KMS_SYNC_GIT_TOKEN instead (a URL on the command line is visible to every user of the machine, and git keeps it in .git/config)${ssh ? '; for ssh, only a user name (ssh://git@host/…)' : ''}`;
}

/**
 * --verify-commits FILE: an ssh allowed-signers file the operator keeps (a ConfigMap, /etc), never
 * in the state folder, whose checkout a commit writes; at least one key; ssh-keygen on PATH (git
 * verifies ssh signatures with it).
 */
function allowedSignersFile(file: string, stateDir: string, env: NodeJS.ProcessEnv): string {
  const abs = path.resolve(file);
  if (abs === stateDir || abs.startsWith(`${stateDir}${path.sep}`))
    throw new UsageError(
      `--verify-commits ${file}: the allowed signers file is inside the state folder (${stateDir}), whose checkout a commit writes; keep it outside (a ConfigMap, /etc/kms-sync)`,
    );
  let text: string;
  try {
    text = readFileSync(abs, 'utf8');
  } catch (e) {
    throw new UsageError(
      `--verify-commits ${file}: cannot read the allowed signers file (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
    );
  }
  const keys = text.split('\n').filter((l) => l.trim() && !l.trim().startsWith('#'));
  if (keys.length === 0)
    throw new UsageError(
      `--verify-commits ${file}: no key in the allowed signers file (one line per signer: "PRINCIPAL namespaces="git" ssh-ed25519 AAAA…", see ssh-keygen(1) ALLOWED SIGNERS)`,
    );
  const onPath = (env.PATH ?? '').split(path.delimiter).some((dir) => dir && existsSync(path.join(dir, 'ssh-keygen')));
  if (!onPath)
    throw new UsageError(
      '--verify-commits: ssh-keygen is not on PATH (git checks ssh signatures with it; install openssh-client)',
    );
  return abs;
}

/** --expose: which reads are open without the token. */
function exposedDoors(values: string[]): Set<Exposable> {
  const doors = new Set<Exposable>();
  for (const v of values
    .flatMap((x) => x.split(','))
    .map((x) => x.trim())
    .filter(Boolean)) {
    if (!(EXPOSABLE as readonly string[]).includes(v))
      throw new UsageError(`--expose ${v}: expected ${EXPOSABLE.join(', ')} (comma-separated)`);
    doors.add(v as Exposable);
  }
  return doors;
}

/** --allowed-host: a host name (no scheme, port or path). */
function allowedHost(v: string): string {
  const name = v.trim().toLowerCase().replace(/\.$/, '');
  if (!/^[a-z0-9*]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/.test(name) || name.includes('*')) {
    throw new UsageError(
      `--allowed-host ${JSON.stringify(v)}: expected a host name such as kms-sync-agent.example.com (no scheme, port or path)`,
    );
  }
  return name;
}

/** The GitHub owner/name or GitLab project path of a repository URL, when it names one. */
function repoPath(repo: string): string | undefined {
  const m = /^(?:[a-z+]+:\/\/(?:[^@/]+@)?[^/]+\/|[^@/]+@[^:]+:)(.+?)(?:\.git)?\/?$/i.exec(repo);
  return m?.[1];
}

/**
 * process.exit(code) once stdout and stderr hold nothing more to write, or at `deadline` (a reader
 * that stopped is not waited for longer). The log goes straight to stdout: to a pipe whose reader
 * lags (a container's log collector, a CI runner, a test), Node keeps what the pipe has not taken
 * yet in memory and writes it as the reader catches up, and process.exit dropped it: the agent's
 * last lines, "stopped" among them.
 */
function exitOnceWritten(code: number, deadline: number): void {
  const holds = (stream: NodeJS.WriteStream) => !stream.destroyed && stream.writableLength > 0;
  const exitWhenWritten = () => {
    if ((holds(process.stdout) || holds(process.stderr)) && Date.now() < deadline) setTimeout(exitWhenWritten, 10);
    else process.exit(code);
  };
  exitWhenWritten();
}

export function registerAgent(program: Command) {
  const agent = program
    .command('agent')
    .description(
      'run continuously: pull the configuration from git, reconcile it on an interval and on webhooks, serve metrics, status and a status page',
    )
    .option(
      '--repo <url>',
      '(required) git repository of the configuration (https, ssh, file://); an https token goes in KMS_SYNC_GIT_TOKEN, never in the URL',
    )
    .option('--ref <ref>', "branch or tag to follow (default: the remote's default branch)")
    .option('--path <dir>', 'folder of the configuration inside the repository', '.')
    .option('--cdktf', 'the folder is a CDKTF app (its cdktf.json is run, as plan --cdktf DIR does)')
    .option(
      '--max-file-size <size>',
      'largest configuration file of a revision, e.g. 5MB (default: $KMS_SYNC_MAX_FILE_SIZE or 5MB)',
    )
    .option(
      '--max-config-size <size>',
      "largest sum of a revision's configuration files, e.g. 50MB (default: $KMS_SYNC_MAX_CONFIG_SIZE or 50MB)",
    )
    .option('--interval <duration>', "time between reconciles (Flux's interval)", '5m')
    .addOption(
      new Option(
        '--mode <mode>',
        'detect: plan and report drift, never write; sync: apply each new revision; self-heal: also undo drift',
      )
        .choices(['detect', 'sync', 'self-heal'])
        .default('sync'),
    )
    .option(
      '--prune',
      'delete what this configuration created or claimed and no longer defines (Flux\'s prune; without it they are kept and reported as "requires pruning"); never protected ones',
    )
    .option('--prune-unmanaged', 'also delete unmanaged resources in scope (not created by kms-sync), as apply --prune')
    .option(
      '--max-deletes <n>',
      'deletion guard: a revision that would delete or revoke more than this (or any key of a protected client) is applied without its deletes until approved (POST /api/approve-deletes, a "kms-sync: approve-deletes" line in its commit message)',
      nonNegativeInt,
      10,
    )
    .option(
      '--allow-empty',
      "reconcile a revision whose configuration defines no project or environment (Argo CD's allowEmpty; it then changes nothing); without it such a revision is invalid and the last good one stays",
    )
    .option('--suspend', 'start suspended (POST /api/resume resumes; kept across restarts until resumed)')
    .option('--listen <host:port>', 'address of the HTTP server (metrics, health, status, webhooks)', '127.0.0.1:8080')
    .option(
      '--state-dir <dir>',
      '(required) folder for the checkout, the journal, the default store and the age key (a persistent volume in a container)',
    )
    .addOption(
      new Option('--log-format <format>', 'text or json lines on stdout').choices(['text', 'json']).default('text'),
    )
    .option(
      '--ui-token <source>',
      'the token of the page, /api/* and /metrics: env:NAME or file:PATH (default: $KMS_SYNC_UI_TOKEN when set); writes need it as Authorization: Bearer; required unless --listen is a loopback address',
    )
    .option(
      '--expose <doors>',
      'reads open without the token: metrics, status (the page and /api/status); comma-separated, repeatable (default: none)',
      (v: string, prev: string[]) => [...prev, v],
      [],
    )
    .option(
      '--allowed-host <name>',
      'a host name the agent answers without the token besides localhost and IP addresses (the name of its Service or ingress; repeatable); refuses DNS rebinding',
      (v: string, prev: string[]) => [...prev, allowedHost(v)],
      [],
    )
    .addOption(
      new Option(
        '--metrics-auth',
        'kept for old command lines: /metrics takes the token unless --expose metrics',
      ).hideHelp(),
    )
    .option('--url <url>', 'service base URL ending in /api/v1 (default: $KMS_API_URL)')
    .option('--parallelism <n>', 'write requests in flight at once (reads use 4x as many)', positiveInt, 8)
    .option('--max-rps <n>', 'client-side rate limit, requests per second', positiveInt)
    .option('--lock-timeout <duration>', 'how long a reconcile waits for another run of the configuration', '30s')
    .addOption(
      new Option(
        '--commit-status <provider>',
        'set a commit status on each reconciled revision (GITHUB_TOKEN / GITLAB_TOKEN)',
      ).choices(['github', 'gitlab']),
    )
    .option('--status-repo <path>', 'the GitHub owner/name or GitLab project of --commit-status (default: from --repo)')
    .option('--page-url <url>', 'link to the status page in notifications')
    .option(
      '--stuck-timeout <duration>',
      'one reconcile running longer than this means the loop is stuck: /healthz fails, so the orchestrator restarts the agent',
      '15m',
    )
    .option(
      '--git-timeout <duration>',
      'longest one git command (a fetch) may take before it is cut off and reported as timed out',
      '2m',
    )
    .option(
      '--verify-commits <allowed-signers>',
      "reconcile only commits signed by a key of this ssh allowed-signers file (git commit -S with gpg.format ssh; Flux's verify); unsigned or otherwise signed revisions are refused like invalid ones",
    )
    .option(
      '--policy <file>',
      'operator policy file (a ConfigMap mount; never in the repository): which ${env:} variables, store hosts, CA files and recipients the configuration may use (default: $KMS_SYNC_POLICY)',
    )
    .option(
      '--allow-env <name>',
      'let ${env:NAME} read this variable (repeatable; NAME_* for a prefix; also KMS_SYNC_ENV_ALLOW)',
      (v: string, prev: string[]) => [...prev, v],
      [],
    )
    .option(
      '--allow-new-recipients',
      "add age recipients to the state folder's stores that already hold keys (also KMS_SYNC_ALLOW_NEW_RECIPIENTS=1)",
    )
    .option(
      '--sync-window <window>',
      'write only inside this window, DAYS HH:MM-HH:MM in UTC ("Mon-Fri 08:00-18:00", "* 22:00-02:00"; repeatable); outside it the agent reports as in detect mode',
      (v: string, prev: string[]) => [...prev, v],
      [],
    )
    .addHelpText(
      'after',
      `
Environment: KMS_API_URL, KMS_API_KEY (the service); KMS_SYNC_GITHUB_WEBHOOK_SECRET (POST /hooks/github,
X-Hub-Signature-256); KMS_SYNC_UI_TOKEN (the token, when --ui-token is not given); KMS_SYNC_GITLAB_WEBHOOK_TOKEN (POST /hooks/gitlab, X-Gitlab-Token); KMS_SYNC_GIT_TOKEN
(https fetches); KMS_SYNC_NOTIFY_WEBHOOK (Slack-compatible URL for failures, new drift, keys expiring);
GITHUB_TOKEN / GITHUB_API_URL, GITLAB_TOKEN / GITLAB_API_URL (--commit-status); SOPS_AGE_KEY_FILE (default:
STATE_DIR/age/keys.txt).`,
    )
    .action(async (o: AgentFlags) => runAgentCommand(o));
  // `agent status|reconcile|suspend|resume` talk to a running agent.
  registerAgentRemote(agent);
}

async function runAgentCommand(o: AgentFlags): Promise<void> {
  const env = process.env;
  // Checked here rather than by commander, which would ask for them before `agent status` too.
  for (const [flag, value] of [
    ['--repo <url>', o.repo],
    ['--state-dir <dir>', o.stateDir],
  ] as const) {
    if (!value)
      throw new UsageError(
        `required option '${flag}' not specified (or a subcommand: kms-sync agent status|reconcile|suspend|resume --url http://AGENT:8080)`,
      );
  }
  loadSystemdCredentials(env);
  const intervalMs = duration('--interval', o.interval);
  const limits = limitsOf(o, env);
  const lockTimeoutMs = /^0+[smhdw]?$/.test(o.lockTimeout.trim()) ? 0 : duration('--lock-timeout', o.lockTimeout);
  const listen = parseListen(o.listen);
  const stuckAfterMs = duration('--stuck-timeout', o.stuckTimeout);
  const gitTimeoutMs = duration('--git-timeout', o.gitTimeout);
  if (gitTimeoutMs >= stuckAfterMs)
    throw new UsageError(
      `--git-timeout ${o.gitTimeout}: must be shorter than --stuck-timeout (${o.stuckTimeout}), or a slow fetch would make /healthz fail and restart the agent`,
    );
  let windows;
  try {
    windows = o.syncWindow.map(parseSyncWindow);
  } catch (e) {
    if (e instanceof SyncWindowError) throw new UsageError(e.message);
    throw e;
  }
  const userInfo = repoUserInfoProblem(o.repo);
  if (userInfo) throw new UsageError(userInfo);
  const stateDir = path.resolve(o.stateDir);
  const checkoutDir = stateLayout(stateDir).checkout;
  if (path.resolve(o.path).startsWith(`${checkoutDir}${path.sep}`))
    throw new UsageError('--path is a folder inside the repository, not on this machine');
  if (o.path.split(/[\\/]/).includes('..') || path.isAbsolute(o.path))
    throw new UsageError(`--path ${o.path}: a folder inside the repository (relative, without ..)`);
  let policy;
  try {
    policy = readOperatorPolicy({
      flags: {
        ...(o.policy ? { policy: o.policy } : {}),
        allowEnv: o.allowEnv,
        ...(o.allowNewRecipients ? { allowNewRecipients: true } : {}),
      },
      env,
      configRoot: stateDir,
    });
  } catch (e) {
    if (e instanceof PolicyError) throw new UsageError(e.message);
    throw e;
  }
  const verifyCommits = o.verifyCommits !== undefined ? allowedSignersFile(o.verifyCommits, stateDir, env) : undefined;
  const log = createLogger(o.logFormat);
  // The age identity of the default store lives with the store, under the state folder, unless one is given.
  if (!env.SOPS_AGE_KEY && !env.SOPS_AGE_KEY_FILE) env.SOPS_AGE_KEY_FILE = stateLayout(stateDir).ageKeyFile;
  const uiToken = o.uiToken
    ? readToken('--ui-token', o.uiToken, env)
    : env.KMS_SYNC_UI_TOKEN !== undefined
      ? readToken('KMS_SYNC_UI_TOKEN', 'env:KMS_SYNC_UI_TOKEN', env)
      : undefined;
  if (uiToken === undefined && !loopbackHost(listen.host)) {
    throw new UsageError(
      `--listen ${o.listen} is reachable from other machines, and without a token anyone who reaches it could suspend the agent: set --ui-token file:PATH (or KMS_SYNC_UI_TOKEN), or listen on 127.0.0.1`,
    );
  }
  const expose = exposedDoors(o.expose);
  if (o.metricsAuth) expose.delete('metrics');
  const access: AccessPolicy = {
    ...(uiToken !== undefined ? { token: uiToken } : {}),
    expose,
    allowedHosts: new Set([...o.allowedHost, ...(/^[\d.]+$|:/.test(listen.host) ? [] : [listen.host.toLowerCase()])]),
  };
  const unsafeState = unsafeStateDirReason(stateDir);
  if (unsafeState)
    throw new UsageError(
      `--state-dir ${stateDir}: ${unsafeState}; someone else could change what the agent runs and stores there (git hooks of the checkout, the journal): check its content, then make it yours and private (chown, chmod 700), or pick another folder`,
    );
  const metrics = new AgentMetrics();
  const conn = connect(o, env, (line) => {
    metrics.apiRetries.inc();
    log.warn(line);
  });
  const notifierOpts: Omit<NotifierOptions, 'metrics'> = {
    log,
    ...(env.KMS_SYNC_NOTIFY_WEBHOOK ? { webhookUrl: env.KMS_SYNC_NOTIFY_WEBHOOK } : {}),
    ...(o.pageUrl ? { pageUrl: o.pageUrl } : {}),
  };
  if (o.commitStatus === 'github') {
    const repo = o.statusRepo ?? repoPath(o.repo);
    if (!env.GITHUB_TOKEN || !repo)
      throw new UsageError(
        '--commit-status github needs GITHUB_TOKEN and the repository (--status-repo OWNER/NAME when --repo does not name it)',
      );
    notifierOpts.commitStatus = {
      kind: 'github',
      apiUrl: env.GITHUB_API_URL ?? 'https://api.github.com',
      repo,
      token: env.GITHUB_TOKEN,
    };
  } else if (o.commitStatus === 'gitlab') {
    const project = o.statusRepo ?? repoPath(o.repo);
    if (!env.GITLAB_TOKEN || !project)
      throw new UsageError(
        '--commit-status gitlab needs GITLAB_TOKEN and the project (--status-repo GROUP/NAME or its id when --repo does not name it)',
      );
    notifierOpts.commitStatus = {
      kind: 'gitlab',
      apiUrl: env.GITLAB_API_URL ?? 'https://gitlab.com/api/v4',
      project,
      token: env.GITLAB_TOKEN,
    };
  }
  log.info(
    `state folder ${stateDir}: the journal, the default store and the age key live here, never in the checkout; in a container it must be a persistent volume, or keys issued before a restart are lost with it`,
  );
  const notify = notifierOpts.webhookUrl || notifierOpts.commitStatus;
  const agent = await startAgent({
    repo: o.repo,
    ...(o.ref ? { ref: o.ref } : {}),
    path: o.path === '.' ? '' : o.path,
    cdktf: Boolean(o.cdktf),
    intervalMs,
    mode: o.mode,
    prune: Boolean(o.prune),
    pruneUnmanaged: Boolean(o.pruneUnmanaged),
    maxDeletes: o.maxDeletes,
    suspend: Boolean(o.suspend),
    listen,
    stateDir,
    conn,
    limits,
    policy,
    ...(windows.length ? { windows } : {}),
    parallelism: o.parallelism,
    lockTimeoutMs,
    stuckAfterMs,
    gitTimeoutMs,
    ...(verifyCommits ? { verifyCommits } : {}),
    ...(o.allowEmpty ? { allowEmpty: true } : {}),
    log,
    metrics,
    access,
    ...(env.KMS_SYNC_GITHUB_WEBHOOK_SECRET ? { githubSecret: env.KMS_SYNC_GITHUB_WEBHOOK_SECRET } : {}),
    ...(env.KMS_SYNC_GITLAB_WEBHOOK_TOKEN ? { gitlabToken: env.KMS_SYNC_GITLAB_WEBHOOK_TOKEN } : {}),
    ...(notify ? { notifier: (metrics) => new Notifier({ ...notifierOpts, metrics }) } : {}),
  });
  // SIGTERM (Kubernetes, systemd, docker stop) and SIGINT: finish the reconcile in flight as an
  // interrupted apply does, release the lock, exit 0. A second signal exits at once.
  let signals = 0;
  const onSignal = (signal: NodeJS.Signals) => {
    signals++;
    if (signals > 1) {
      log.warn(`${signal} again: exiting now; requests cut off in flight are recovered by the next start`);
      exitOnceWritten(1, Date.now() + 1_000);
      return;
    }
    const signalled = Date.now();
    log.info(`${signal} received: finishing the reconcile in flight (no new request), then stopping`);
    // Within 10 s whatever happens (Kubernetes' default grace period is 30 s): a request stuck in retries is
    // cut off (its intent is journaled; the next start recovers it).
    const busy = setTimeout(() => {
      log.warn('still busy after 9 s: exiting; the next start recovers what was cut off');
      exitOnceWritten(1, Date.now() + 1_000);
    }, 9_000).unref();
    void agent.stop().then(async () => {
      await conn.api.close();
      clearTimeout(busy);
      log.info('stopped');
      exitOnceWritten(0, signalled + 9_000);
    });
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
  await agent.done;
}
