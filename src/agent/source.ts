// The agent's source: a git repository fetched shallowly into a cache folder under --state-dir and
// checked out (detached, forced, cleaned) at the revision of --ref. The checkout holds nothing of
// the agent's own: the journal and the default store live elsewhere under --state-dir, so a fetch
// or a reset never touches a raw key. Credentials for https come from the environment
// (KMS_SYNC_GIT_TOKEN) and reach git through GIT_CONFIG_* variables: never in a command line, a URL
// or the cache's .git/config.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readdir, readlink, realpath, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { isCredentialEnvName } from '../model/redact.js';
import { safeUrl } from '../report/redact.js';

export class SourceError extends Error {}

/**
 * Whether a process of this user has its working folder in `dir` (git runs with -C, so a git
 * working in the checkout has it as its cwd); undefined where /proc cannot tell.
 */
async function processWorksIn(dir: string): Promise<boolean | undefined> {
  const pids = await readdir('/proc').catch(() => undefined);
  if (!pids) return undefined;
  const root = await realpath(dir).catch(() => path.resolve(dir));
  for (const pid of pids) {
    if (!/^\d+$/.test(pid) || Number(pid) === process.pid) continue;
    const cwd = await readlink(`/proc/${pid}/cwd`).catch(() => undefined);
    if (cwd && (cwd === root || cwd.startsWith(`${root}/`))) return true;
  }
  return false;
}

/** How long one git command may take unless --git-timeout says otherwise. */
export const DEFAULT_GIT_TIMEOUT_MS = 120_000;

export interface SourceOptions {
  repo: string;
  /** Branch or tag; undefined: the remote's default branch (its HEAD). */
  ref?: string;
  /** Folder of the checkout (created on first use). */
  dir: string;
  env?: NodeJS.ProcessEnv;
  /** Longest one git command (a fetch) may take (--git-timeout; default 2 minutes). */
  timeoutMs?: number;
}

/** The URL as shown in logs, the page and notifications: no user info, query or fragment. */
export function shownRepo(repo: string): string {
  return /^[a-z][a-z0-9+.-]*:\/\//i.test(repo) ? safeUrl(repo) : repo.replace(/^[^@/]+@/, '');
}

export class GitSource {
  readonly opts: SourceOptions;
  private initialized = false;

  constructor(opts: SourceOptions) {
    this.opts = opts;
  }

  get dir(): string {
    return this.opts.dir;
  }

  private get timeoutMs(): number {
    return this.opts.timeoutMs ?? DEFAULT_GIT_TIMEOUT_MS;
  }

  private gitEnv(): NodeJS.ProcessEnv {
    const from = this.opts.env ?? process.env;
    // git gets no credential of the agent's (the service's key, webhook secrets): only its own token,
    // below, and the ssh agent's socket (a path, kept for ssh:// repositories).
    const env: NodeJS.ProcessEnv = Object.fromEntries(
      Object.entries(from).filter(([name]) => name === 'SSH_AUTH_SOCK' || !isCredentialEnvName(name)),
    );
    // GIT_CEILING_DIRECTORIES: a checkout that is not (or no longer) a repository is never taken
    // for a repository around the state folder, whose files a forced checkout and clean would touch.
    Object.assign(env, {
      GIT_TERMINAL_PROMPT: '0',
      GIT_ASKPASS: 'true',
      LC_ALL: 'C',
      GIT_CEILING_DIRECTORIES: path.dirname(path.resolve(this.opts.dir)),
    });
    const token = from.KMS_SYNC_GIT_TOKEN;
    // Over https only (or plain http to this machine: a local mirror or proxy), never in clear over a network.
    if (
      token &&
      (/^https:\/\//i.test(this.opts.repo) ||
        /^http:\/\/(127\.0\.0\.1|localhost|\[::1\])(:\d+)?\//i.test(this.opts.repo))
    ) {
      const basic = Buffer.from(`x-access-token:${token}`).toString('base64');
      const n = Number(env.GIT_CONFIG_COUNT ?? 0) || 0;
      env[`GIT_CONFIG_KEY_${n}`] = 'http.extraHeader';
      env[`GIT_CONFIG_VALUE_${n}`] = `Authorization: Basic ${basic}`;
      env.GIT_CONFIG_COUNT = String(n + 1);
    }
    return env;
  }

  private git(args: string[], signal?: AbortSignal, maxBuffer = 4 << 20): Promise<string> {
    return new Promise((resolve, reject) => {
      const timeoutMs = this.timeoutMs;
      execFile(
        'git',
        ['-C', this.opts.dir, ...args],
        { env: this.gitEnv(), timeout: timeoutMs, maxBuffer, ...(signal ? { signal } : {}) },
        (error, stdout, stderr) => {
          if (!error) return resolve(stdout.trim());
          // Killed by the time limit (a server that accepts and never answers): said so, with the flag that sets it.
          if (error.killed && !signal?.aborted)
            return reject(
              new SourceError(
                `git ${args[0]} timed out after ${timeoutMs / 1000} s (--git-timeout) against ${shownRepo(this.opts.repo)}`,
              ),
            );
          // git's own message, without the URL's credentials (none are in it; a user may have put some there).
          // Its fatal:/error: lines say what went wrong; the advice git wraps around them does not.
          const lines = String(stderr || error.message)
            .split('\n')
            .map((l) => l.trim())
            .filter((l) => l && !l.startsWith('hint:'));
          const errors = lines.filter((l) => /^(fatal|error):/.test(l));
          const text = (errors.length > 0 ? errors : lines).slice(-3).join('; ');
          reject(
            new SourceError(`git ${args[0]} failed: ${text.split(this.opts.repo).join(shownRepo(this.opts.repo))}`),
          );
        },
      );
    });
  }

  private async init(signal?: AbortSignal): Promise<void> {
    if (this.initialized) return;
    try {
      await this.prepare(signal);
    } catch {
      signal?.throwIfAborted();
      // A git command cut off by a stop or a kill (an init half done, a config.lock left behind)
      // leaves a .git every later start fails on; the checkout holds nothing of the agent's, so it
      // is made again.
      await rm(path.join(this.opts.dir, '.git'), { recursive: true, force: true });
      await this.prepare(signal);
    }
    this.initialized = true;
  }

  private async prepare(signal?: AbortSignal): Promise<void> {
    await mkdir(this.opts.dir, { recursive: true, mode: 0o700 });
    if (!existsSync(path.join(this.opts.dir, '.git'))) await this.git(['init', '-q'], signal);
    await this.git(['rev-parse', '--git-dir'], signal);
    // The remote's URL is set on every start: --repo may have changed.
    await this.git(['remote', 'remove', 'origin'], signal).catch(() => undefined);
    await this.git(['remote', 'add', 'origin', this.opts.repo], signal);
  }

  /**
   * Lock files a git command cut off with its agent left in .git (index.lock after a checkout killed
   * mid-way, shallow.lock after a fetch): every later command fails on them. The checkout is the
   * agent's alone (the state folder's lock), so a lock is stale once no process works in the
   * checkout any more: a git of a killed agent may still be finishing, and its lock must stay until
   * it does. Where processes cannot be listed (no /proc), a lock is stale once older than a git
   * command may run.
   */
  private async clearStaleLocks(): Promise<void> {
    const gitDir = path.join(this.opts.dir, '.git');
    const locks = (await readdir(gitDir).catch(() => [] as string[])).filter((name) => name.endsWith('.lock'));
    if (locks.length === 0) return;
    const busy = await processWorksIn(this.opts.dir);
    const oldest = Date.now() - this.timeoutMs;
    for (const name of locks) {
      const file = path.join(gitDir, name);
      const st = await stat(file).catch(() => undefined);
      if (st?.isFile() && (busy === false || st.mtimeMs < oldest)) await rm(file, { force: true });
    }
  }

  /** Fetches --ref (one commit deep) and returns its commit id, without touching the checkout. */
  async fetch(signal?: AbortSignal): Promise<string> {
    await this.init(signal);
    await this.clearStaleLocks();
    const ref = this.opts.ref ?? 'HEAD';
    await this.git(
      ['fetch', '-q', '--depth', '1', '--no-tags', '--no-recurse-submodules', 'origin', `+${ref}:refs/kms-sync/target`],
      signal,
    );
    return this.git(['rev-parse', '--verify', 'refs/kms-sync/target^{commit}'], signal);
  }

  /** Makes the checkout exactly the given commit: tracked files reset, untracked ones removed. */
  async checkout(revision: string, signal?: AbortSignal): Promise<void> {
    await this.clearStaleLocks();
    await this.git(['checkout', '-q', '--force', '--detach', revision], signal);
    await this.git(['clean', '-q', '-ffdx'], signal);
  }

  /**
   * The files of a revision under a folder of the repository, read from git's tree before a
   * checkout: mode (120000 is a symbolic link), size in bytes, path inside the repository.
   */
  async tree(revision: string, folder: string): Promise<{ mode: string; size: number; path: string }[]> {
    // A large repository's listing (its --path the root) runs to megabytes: 64 MB of it are read.
    const out = await this.git(
      ['ls-tree', '-r', '-l', '-z', '--full-tree', revision, '--', folder || '.'],
      undefined,
      64 << 20,
    );
    const entries: { mode: string; size: number; path: string }[] = [];
    for (const line of out.split('\0')) {
      const m = /^(\d+) \w+ [0-9a-f]+\s+(-|\d+)\t(.*)$/s.exec(line);
      if (m) entries.push({ mode: m[1]!, size: m[2] === '-' ? 0 : Number(m[2]), path: m[3]! });
    }
    return entries;
  }

  /**
   * The commit's signature checked against an ssh allowed-signers file (`ssh-keygen -Y verify`,
   * through git): git's verdict (`G` good and allowed, `U` a key not in the file, `B` bad, `N` none,
   * `E` cannot be checked, `X`/`Y`/`R` expired or revoked), the key's fingerprint and the principal.
   * The file is the operator's, given on the command line: git's own configuration of the checkout
   * cannot name another one (`-c` wins over it).
   */
  async signature(
    revision: string,
    allowedSignersFile: string,
  ): Promise<{ verdict: string; key: string; signer: string }> {
    const out = await this.git([
      '-c',
      `gpg.ssh.allowedSignersFile=${allowedSignersFile}`,
      '-c',
      'gpg.format=ssh',
      'log',
      '-1',
      '--format=%G?%x00%GK%x00%GS',
      revision,
      '--',
    ]);
    const [verdict = 'E', key = '', signer = ''] = out.split('\0');
    return { verdict: verdict.trim() || 'E', key: key.trim(), signer: signer.trim() };
  }

  /** The commit's message: its subject is shown on the page (escaped like all text), its lines may approve deletes. */
  async message(revision: string): Promise<string> {
    return this.git(['log', '-1', '--format=%B', revision]).catch(() => '');
  }

  /** The commit's subject line. */
  async subject(revision: string): Promise<string> {
    return (await this.message(revision)).split('\n')[0] ?? '';
  }
}
