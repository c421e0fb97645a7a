// Notifications: a commit status on each reconciled revision (GitHub's statuses API, GitLab's
// commit status API) and a Slack-compatible JSON webhook on failures, new drift, every heal and keys
// expiring soon. Each is sent once per change (not on every interval). They carry addresses, revisions,
// results and counts, never a key or a credential (and pass the redaction before they leave).
import { escapeUnsafe } from '../model/printable.js';
import { redactCredentials } from '../model/redact.js';
import type { Logger } from './log.js';
import type { AgentMetrics } from './metrics.js';
import type { AgentStatus, ReconcileRecord } from './status.js';

export interface NotifierOptions {
  log: Logger;
  metrics: AgentMetrics;
  /** Slack-compatible incoming webhook URL (from KMS_SYNC_NOTIFY_WEBHOOK). */
  webhookUrl?: string;
  commitStatus?:
    | { kind: 'github'; apiUrl: string; repo: string; token: string }
    | { kind: 'gitlab'; apiUrl: string; project: string; token: string };
  /** Link shown in notifications (the status page). */
  pageUrl?: string;
  fetchImpl?: typeof fetch;
}

const short = (rev: string | undefined) => rev?.slice(0, 12) ?? '?';

/**
 * Text from the service or a configuration (names, addresses, errors) for Slack's mrkdwn: `&`, `<`
 * and `>` as entities (so `<!channel>`, `<@U123>` and disguised links `<https://…|text>` are shown,
 * never acted on), line breaks and other controls as `\n` (no fake status line), bidi characters
 * as `\u202e`.
 */
export function slackText(text: string): string {
  return escapeUnsafe(text).replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

/** An address or name as inline code: no formatting, emoji or mention inside it. */
const slackCode = (text: string) => `\`${slackText(text).replace(/`/g, "'")}\``;

export class Notifier {
  private readonly o: NotifierOptions;
  private lastProblem = '';
  private lastPruning = '';
  private lastHeld = '';
  private knownDrift = new Set<string>();
  private warnedExpiring = new Set<string>();
  private statusSent = new Map<string, string>();
  private signal: AbortSignal | undefined;

  constructor(o: NotifierOptions) {
    this.o = o;
  }

  /** `signal`: the agent is stopping; a notification in flight is cut off rather than delay the exit. */
  async afterReconcile(r: ReconcileRecord, s: AgentStatus, signal?: AbortSignal): Promise<void> {
    this.signal = signal;
    await this.commitStatus(r, s).catch((e: unknown) => this.failed('commit_status', e));
    if (!this.o.webhookUrl) return;
    const lines: string[] = [];
    // Failures: once per distinct problem, and once when it clears.
    const problem = r.result === 'success' ? '' : `${r.result}: ${r.errors.slice(0, 5).map(slackText).join('; ')}`;
    if (problem && problem !== this.lastProblem)
      lines.push(`:x: kms-sync agent: reconcile of ${short(r.revision)} ${problem}`);
    if (!problem && this.lastProblem)
      lines.push(`:white_check_mark: kms-sync agent: reconcile of ${short(r.revision)} succeeded again`);
    this.lastProblem = problem;
    // New drift: items not reported before.
    const now = new Set(s.drift.map((d) => `${d.category} ${slackCode(d.address)}`));
    const fresh = [...now].filter((d) => !this.knownDrift.has(d));
    if (fresh.length)
      lines.push(
        `:warning: kms-sync agent: new drift (${fresh.length}): ${fresh.slice(0, 10).join(', ')}${fresh.length > 10 ? ', …' : ''}`,
      );
    this.knownDrift = now;
    // What requires pruning and what the guard holds: once per change of the set.
    const pruning = (s.requiresPruning ?? [])
      .map((d) => d.address)
      .sort()
      .join(',');
    if (pruning && pruning !== this.lastPruning)
      lines.push(
        `:broom: kms-sync agent: ${s.requiresPruning!.length} resource(s) left the configuration and require pruning (kept without --prune): ${s
          .requiresPruning!.slice(0, 10)
          .map((d) => slackCode(d.address))
          .join(', ')}${s.requiresPruning!.length > 10 ? ', …' : ''}`,
      );
    this.lastPruning = pruning;
    const held = s.heldDeletes ? `${s.heldDeletes.revision}:${s.heldDeletes.operations.length}` : '';
    if (held && held !== this.lastHeld)
      lines.push(
        `:octagonal_sign: kms-sync agent: deletes of ${short(s.heldDeletes!.revision)} held: ${slackText(s.heldDeletes!.reason)}; approve with POST /api/approve-deletes`,
      );
    this.lastHeld = held;
    // Every heal, once (a reconcile without one says nothing of it).
    for (const id of r.heals ?? []) {
      const h = s.heals.find((x) => x.id === id);
      if (!h) continue;
      const fields = h.fields
        .slice(0, 5)
        .map((f) => `${f.path}: ${JSON.stringify(f.before)} -> ${JSON.stringify(f.after)}`)
        .join('; ')
        .slice(0, 600);
      lines.push(
        `:adhesive_bandage: kms-sync agent: healed ${slackCode(h.address)}: ${slackText(h.reason)}${fields ? ` (${slackText(fields)})` : ''} at ${short(h.revision)}${h.count > 1 ? ` (the same heal ${h.count} times)` : ''}`,
      );
    }
    // Keys entering the 7-day window.
    const soon = s.keys.expiries.filter((k) => {
      const t = Date.parse(k.expiresAt) - Date.now();
      return t >= 0 && t <= 7 * 86_400_000;
    });
    const newlySoon = soon.filter((k) => !this.warnedExpiring.has(`${k.address} ${k.expiresAt}`));
    for (const k of newlySoon) this.warnedExpiring.add(`${k.address} ${k.expiresAt}`);
    if (newlySoon.length)
      lines.push(
        `:hourglass: kms-sync agent: ${newlySoon.length} key(s) expire within 7 days: ${newlySoon
          .slice(0, 10)
          .map((k) => `${slackCode(k.address)} (${k.expiresAt.slice(0, 10)}${k.autoRotate ? ', auto-rotates' : ''})`)
          .join(', ')}`,
      );
    if (lines.length === 0) return;
    const text = `${lines.join('\n')}${this.o.pageUrl ? `\n${slackText(this.o.pageUrl)}` : ''}`;
    await this.post(this.o.webhookUrl, { text }, {}).then(
      () => this.o.metrics.notifications.inc({ kind: 'webhook', result: 'sent' }),
      (e: unknown) => this.failed('webhook', e),
    );
  }

  private async commitStatus(r: ReconcileRecord, s: AgentStatus): Promise<void> {
    const cs = this.o.commitStatus;
    if (!cs || !r.revision) return;
    // The revision the result is about: an invalid one gets its failure, a good one its outcome.
    const revision = r.result === 'invalid' && s.revision.invalid ? s.revision.invalid.revision : r.revision;
    const ok = r.result === 'success';
    const pendingDrift = ok && s.drift.length > 0 && s.revision.synced !== revision;
    const description = ok
      ? pendingDrift
        ? `detected ${s.drift.length} difference(s) (${s.agent.mode})`
        : `applied by the kms-sync agent (${s.agent.mode})`
      : failureDescription(r);
    const key = `${ok}:${description}`;
    if (this.statusSent.get(revision) === key) return;
    if (cs.kind === 'github') {
      await this.post(
        `${cs.apiUrl.replace(/\/+$/, '')}/repos/${cs.repo}/statuses/${revision}`,
        {
          state: ok ? 'success' : r.result === 'invalid' || r.result === 'failed' ? 'failure' : 'error',
          context: 'kms-sync/agent',
          description,
          ...(this.o.pageUrl ? { target_url: this.o.pageUrl } : {}),
        },
        {
          authorization: `Bearer ${cs.token}`,
          accept: 'application/vnd.github+json',
          'x-github-api-version': '2022-11-28',
        },
      );
    } else {
      const q = new URLSearchParams({
        state: ok ? 'success' : 'failed',
        name: 'kms-sync/agent',
        description,
        ...(this.o.pageUrl ? { target_url: this.o.pageUrl } : {}),
      });
      await this.post(
        `${cs.apiUrl.replace(/\/+$/, '')}/projects/${encodeURIComponent(cs.project)}/statuses/${revision}?${q}`,
        undefined,
        { 'private-token': cs.token },
      );
    }
    this.statusSent.set(revision, key);
    if (this.statusSent.size > 100) this.statusSent.delete(this.statusSent.keys().next().value!);
    this.o.metrics.notifications.inc({ kind: 'commit_status', result: 'sent' });
  }

  private async post(url: string, body: unknown, headers: Record<string, string>): Promise<void> {
    const res = await (this.o.fetchImpl ?? fetch)(url, {
      method: 'POST',
      headers: {
        'user-agent': 'kms-sync-agent/0.1.0',
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
      ...(body !== undefined ? { body: redactCredentials(JSON.stringify(body)) } : {}),
      signal: this.signal ? AbortSignal.any([AbortSignal.timeout(10_000), this.signal]) : AbortSignal.timeout(10_000),
    });
    await res.arrayBuffer().catch(() => undefined);
    if (!res.ok) throw new Error(`HTTP ${res.status}`);
  }

  private failed(kind: string, e: unknown) {
    this.o.metrics.notifications.inc({ kind, result: 'failed' });
    this.o.log.warn(`notification (${kind}) failed: ${(e as Error).message}`);
  }
}

/** GitHub's limit on a commit status's description (GitLab's is larger). */
const STATUS_DESCRIPTION_MAX = 140;

/**
 * A failure in a commit status: the first error (its file:line first, as paths in the repository),
 * and how many more the page lists; a cut is marked with an ellipsis, never a silent end.
 */
export function failureDescription(r: Pick<ReconcileRecord, 'result' | 'errors'>): string {
  const more = r.errors.length > 1 ? ` (+${r.errors.length - 1} more)` : '';
  const text = `${r.result}: ${r.errors[0] ?? ''}`.replace(/\s+/g, ' ').trim();
  const room = STATUS_DESCRIPTION_MAX - more.length;
  return `${text.length > room ? `${text.slice(0, room - 1)}…` : text}${more}`;
}
