// kms-sync agent status|reconcile|suspend|resume: a running agent driven over its HTTP API, as
// `flux get`, `flux reconcile`, `flux suspend` and `flux resume` drive Flux. The token comes from
// a file or the environment (never a flag value `ps` would show); everything the agent says is
// text from a configuration, a commit or the service, so it is escaped before the terminal sees it.
import { InvalidArgumentError, type Command } from 'commander';
import { AgentRemote, AgentRemoteError } from '../agent/remote.js';
import type { AgentStatus, HistoryRow, ReconcileRecord } from '../agent/status.js';
import { parseTtl } from '../model/index.js';
import { printable } from '../model/printable.js';
import { ExitWith, UsageError } from './errors.js';
import { out } from './output.js';
import { readToken } from './token-source.js';

interface RemoteFlags {
  url?: string;
  token?: string;
  json?: boolean;
}

/** Exit codes of the subcommands: 0 ready / succeeded / done, 2 the agent answered but is not Ready or the reconcile did not succeed, 1 error. */
export const REMOTE_EXIT = { ok: 0, error: 1, notReady: 2 } as const;

const DEFAULT_URL = 'http://127.0.0.1:8080';
/** History rows `status` prints (--json has them all). */
const HISTORY_SHOWN = 10;

/**
 * The subcommand's flags. Commander hands options it meets before a subcommand runs to the parent
 * first, and `kms-sync agent` has a --url of its own (the service's): the address given after
 * `status` lands there, so it is taken from there.
 */
function flagsOf<T extends RemoteFlags>(o: T, cmd: Command): T {
  const parentUrl = (cmd.parent?.opts() as { url?: string } | undefined)?.url;
  return { ...o, ...(o.url === undefined && parentUrl !== undefined ? { url: parentUrl } : {}) };
}

function remoteOf(o: RemoteFlags): AgentRemote {
  const env = process.env;
  const token = o.token
    ? readToken('--token', o.token, env)
    : env.KMS_SYNC_UI_TOKEN
      ? readToken('KMS_SYNC_UI_TOKEN', 'env:KMS_SYNC_UI_TOKEN', env)
      : undefined;
  try {
    return new AgentRemote({
      url: o.url ?? env.KMS_SYNC_AGENT_URL ?? DEFAULT_URL,
      ...(token !== undefined ? { token } : {}),
    });
  } catch (e) {
    if (e instanceof AgentRemoteError) throw new UsageError(e.message);
    throw e;
  }
}

/** Runs one call to the agent; its errors end the command with exit 1 and the reason. */
async function talk<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (e) {
    if (e instanceof AgentRemoteError) throw new ExitWith(REMOTE_EXIT.error, printable(e.message));
    throw e;
  }
}

const p = (v: unknown) => printable(String(v ?? ''));
const short = (rev: string | undefined) => (rev ? p(rev.slice(0, 12)) : '-');

function ago(iso: string | undefined, now: number): string {
  const t = iso ? Date.parse(iso) : NaN;
  if (!Number.isFinite(t)) return '-';
  const s = Math.max(0, Math.round((now - t) / 1000));
  return s < 60
    ? `${s}s ago`
    : s < 3600
      ? `${Math.floor(s / 60)}m ago`
      : s < 86_400
        ? `${Math.floor(s / 3600)}h ago`
        : `${Math.floor(s / 86_400)}d ago`;
}

function interval(seconds: number): string {
  return seconds % 3600 === 0 ? `${seconds / 3600}h` : seconds % 60 === 0 ? `${seconds / 60}m` : `${seconds}s`;
}

/** One reconcile (or a history row of repeats: × N since the first) on one line: result, when, why, revision and subject, counts. */
function recordLine(r: ReconcileRecord & Partial<HistoryRow>, now: number): string {
  const repeats = (r.count ?? 1) > 1 ? ` × ${r.count} since ${ago(r.firstStartedAt, now)}, last` : '';
  const parts = [
    `${p(r.result)}${repeats} ${ago(r.finishedAt, now)} (${p(r.trigger)}, ${(r.durationMs / 1000).toFixed(1)} s)`,
    `revision ${short(r.revision)}${r.subject ? ` "${p(r.subject)}"` : ''}`,
    `planned ${r.planned}, applied ${r.applied}`,
  ];
  if (r.syncWindowOverride) parts.push('sync window overridden');
  if (r.note) parts.push(p(r.note));
  return parts.join('; ');
}

/** The agent's status as `flux get` shows a Kustomization: readiness first, then what it follows and what it found. */
export function renderStatus(s: AgentStatus, url: string, now = Date.now()): string {
  const lines: string[] = [];
  const a = s.agent;
  const c = s.condition;
  lines.push(
    `Agent       ${p(url)}: mode ${p(a.mode)}, interval ${interval(a.intervalSeconds)}, prune ${a.prune ? 'on' : 'off'}${a.suspended ? ', SUSPENDED' : ''}`,
  );
  lines.push(`Source      ${p(a.repo)} ref ${p(a.ref)} path ${p(a.path)}`);
  lines.push(`Ready       ${p(c.status)} ${p(c.reason)}: ${p(c.message)} (since ${ago(c.lastTransitionTime, now)})`);
  lines.push(`Suspended   ${a.suspended ? 'yes (kms-sync agent resume)' : 'no'}`);
  if (a.syncWindows.length)
    lines.push(
      `Windows     ${a.syncWindows.map(p).join(', ')} (UTC): ${a.syncWindowOpen ? 'open' : 'closed'} at the last reconcile`,
    );
  const r = s.revision;
  lines.push(`Revision    fetched ${short(r.fetched)}, last good ${short(r.lastGood)}, synced ${short(r.synced)}`);
  if (r.invalid) {
    lines.push(
      `Invalid     ${short(r.invalid.revision)}: ${r.invalid.unverified ? 'its signature is refused (--verify-commits), ' : ''}not applied, the last good revision is reconciled`,
    );
    for (const e of r.invalid.errors.slice(0, 10)) lines.push(`              ${p(e)}`);
    if (r.invalid.errors.length > 10) lines.push(`              … ${r.invalid.errors.length - 10} more (--json)`);
  }
  if (s.sourceError) lines.push(`Source err  ${p(s.sourceError)}`);
  if (s.serviceError) lines.push(`Service err ${p(s.serviceError)}`);
  if (s.lastReconcile) {
    lines.push(`Last        ${recordLine(s.lastReconcile, now)}`);
    for (const e of s.lastReconcile.errors.slice(0, 5)) lines.push(`              ${p(e)}`);
  } else lines.push('Last        no reconcile yet');
  if (s.environments.length) {
    lines.push('Environments');
    const width = Math.max(...s.environments.map((e) => p(e.projectEnv).length));
    const unknown = Boolean(s.serviceError);
    for (const e of s.environments) {
      const state = unknown ? 'Unknown' : e.synced ? 'Synced' : 'OutOfSync';
      lines.push(
        `  ${p(e.projectEnv).padEnd(width)}  ${state.padEnd(9)}  drift ${e.drift}  keys expiring: ${e.expiring7d} within 7d, ${e.expiring30d} within 30d`,
      );
    }
  }
  if (s.requiresPruning?.length)
    lines.push(
      `Pruning     ${s.requiresPruning.length} resource(s) left the configuration and are kept (the agent runs without --prune): ${s.requiresPruning
        .slice(0, 5)
        .map((d) => p(d.address))
        .join(', ')}${s.requiresPruning.length > 5 ? ', …' : ''}`,
    );
  if (s.heldDeletes)
    lines.push(
      `Held        ${s.heldDeletes.operations.length} delete(s) of revision ${short(s.heldDeletes.revision)} wait for approval (${p(s.heldDeletes.reason)}): POST /api/approve-deletes`,
    );
  // Older agents send no count: each of their rows is one reconcile.
  const history = s.history ?? [];
  if (history.length) {
    lines.push(`History     ${history.length} row(s), newest first; repeats folded (× N since the first)`);
    for (const h of history.slice(0, HISTORY_SHOWN)) lines.push(`  ${recordLine(h as ReconcileRecord, now)}`);
    if (history.length > HISTORY_SHOWN) lines.push(`  … ${history.length - HISTORY_SHOWN} older (--json)`);
  }
  return `${lines.join('\n')}\n`;
}

export function registerAgentRemote(agent: Command): void {
  const common = (cmd: Command) =>
    cmd
      .option('--url <url>', `the agent's address (its --listen; default: $KMS_SYNC_AGENT_URL or ${DEFAULT_URL})`)
      .option(
        '--token <source>',
        "the agent's token: env:NAME or file:PATH (default: $KMS_SYNC_UI_TOKEN when set); never the value itself, which ps would show",
      )
      .option('--json', 'print JSON instead of text');

  common(agent.command('status'))
    .description(
      "show a running agent's state (flux get): Ready condition, revisions, last reconcile, environments; exit 0 when Ready is True, 2 when not",
    )
    .action(async (flags: RemoteFlags, cmd: Command) => {
      const o = flagsOf(flags, cmd);
      const remote = remoteOf(o);
      const s = await talk(() => remote.status());
      out(o.json ? `${JSON.stringify(s, null, 2)}\n` : renderStatus(s, remote.shown));
      if (s.condition.status !== 'True') throw new ExitWith(REMOTE_EXIT.notReady);
    });

  common(agent.command('reconcile'))
    .description(
      'reconcile now (flux reconcile) and wait for the result; exit 0 when it succeeded, 2 when it did not (or the agent is suspended)',
    )
    .option('--no-wait', 'return once the agent accepted the request')
    .option(
      '--timeout <duration>',
      'longest to wait for the reconcile to finish',
      (v: string) => durationOf('--timeout', v),
      5 * 60_000,
    )
    .option(
      '--override-sync-window',
      "write in this reconcile even outside the agent's sync windows (an emergency change; logged by the agent and marked on the reconcile)",
    )
    .action(
      async (flags: RemoteFlags & { wait: boolean; timeout: number; overrideSyncWindow?: boolean }, cmd: Command) => {
        const o = flagsOf(flags, cmd);
        const remote = remoteOf(o);
        const asked = await talk(() => remote.reconcile({ overrideSyncWindow: Boolean(o.overrideSyncWindow) }));
        if (asked.reconcile === 'suspended') {
          out(
            o.json
              ? `${JSON.stringify(asked)}\n`
              : 'The agent is suspended: nothing reconciled (kms-sync agent resume first).\n',
          );
          throw new ExitWith(REMOTE_EXIT.notReady);
        }
        if (!o.wait || !asked.requestedAt) {
          out(
            o.json
              ? `${JSON.stringify(asked)}\n`
              : `Reconcile requested${asked.syncWindowOverride ? ' (sync windows overridden)' : ''}.\n`,
          );
          return;
        }
        if (!o.json)
          out(
            `Reconcile requested${asked.syncWindowOverride ? ' (sync windows overridden)' : ''}; waiting for it to finish …\n`,
          );
        const { record } = await talk(() => remote.waitForReconcile(asked.requestedAt!, { timeoutMs: o.timeout }));
        if (o.json) out(`${JSON.stringify({ ...asked, record }, null, 2)}\n`);
        else {
          out(`${record.result === 'success' ? 'Reconciled' : 'Reconcile ended'}: ${recordLine(record, Date.now())}\n`);
          for (const e of record.errors.slice(0, 20)) out(`  ${p(e)}\n`);
        }
        if (record.result !== 'success') throw new ExitWith(REMOTE_EXIT.notReady);
      },
    );

  for (const [name, verb] of [
    ['suspend', 'suspended'],
    ['resume', 'resumed'],
  ] as const) {
    common(agent.command(name))
      .description(
        name === 'suspend'
          ? "stop reconciling until resumed (flux suspend; kept across the agent's restarts); the reconcile in flight finishes"
          : 'reconcile again after a suspend (flux resume), starting with one reconcile at once',
      )
      .action(async (flags: RemoteFlags, cmd: Command) => {
        const o = flagsOf(flags, cmd);
        const remote = remoteOf(o);
        const r = await talk(() => (name === 'suspend' ? remote.suspend() : remote.resume()));
        out(o.json ? `${JSON.stringify(r)}\n` : `Reconciliation ${verb} (${p(remote.shown)}).\n`);
      });
  }
}

function durationOf(flag: string, v: string): number {
  try {
    return parseTtl(v);
  } catch {
    throw new InvalidArgumentError(`${flag}: expected a duration such as 30s, 5m or 1h`);
  }
}
