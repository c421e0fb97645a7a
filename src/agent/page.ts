// The status page at `/`: one server-rendered HTML document with inline CSS and SVG (no build
// step, no request to anywhere else). Every piece of text in it comes from the status and is
// escaped (names come from the service and from configurations), bidi and invisible characters
// shown as `\u202e`; the server also sends a Content-Security-Policy that allows one script only,
// the page's own (by its hash), so an escaping slip could not run another.
// That script is the suspend/resume control: a write needs `Authorization: Bearer TOKEN`, which a
// browser never sends on its own, so the page asks for the token once, keeps it in the tab's
// sessionStorage (gone when the tab closes, never sent anywhere else) and sends it as a header.
import { createHash } from 'node:crypto';
import { escapeUnsafe } from '../model/printable.js';
import type { AgentStatus, EnvStatus, HistoryRow, KeyExpiry, ReconcileRecord, TimelineEvent } from './status.js';

const ESCAPES: Record<string, string> = {
  '&': '&amp;',
  '<': '&lt;',
  '>': '&gt;',
  '"': '&quot;',
  "'": '&#39;',
  '`': '&#96;',
};

/** Text for HTML content and quoted attribute values; controls, bidi and invisible characters shown escaped (`\u202e`). */
export function esc(value: unknown): string {
  return escapeUnsafe(String(value ?? '')).replace(/[&<>"'`]/g, (c) => ESCAPES[c]!);
}

/** The control's script: POST /api/<button value> with the token of this tab as a bearer header, then reload. */
const CONTROL_SCRIPT = `(() => {
  const KEY = 'kms-sync-agent-token';
  const form = document.getElementById('control');
  const input = document.getElementById('token');
  const note = document.getElementById('control-note');
  if (!form) return;
  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    const action = event.submitter && event.submitter.value;
    if (!/^[a-z]+$/.test(action || '')) return;
    if (input && input.value) { sessionStorage.setItem(KEY, input.value); input.value = ''; }
    const token = sessionStorage.getItem(KEY);
    const headers = { 'content-type': 'application/json' };
    if (token) headers.authorization = 'Bearer ' + token;
    note.textContent = '…';
    try {
      const res = await fetch('/api/' + action, { method: 'POST', headers, body: '{}', credentials: 'omit', cache: 'no-store' });
      if (res.ok) { location.reload(); return; }
      if (res.status === 401) sessionStorage.removeItem(KEY);
      note.textContent = res.status === 401 ? 'The token was not accepted.' : 'Refused: ' + (await res.text()).slice(0, 200);
    } catch (e) {
      note.textContent = 'The agent did not answer.';
    }
  });
  if (input && sessionStorage.getItem(KEY)) input.placeholder = 'token kept for this tab';
})();`;

/** The page's Content-Security-Policy: its own script (by hash), same-origin requests, nothing else. */
export const PAGE_CSP = `default-src 'none'; script-src 'sha256-${createHash('sha256').update(CONTROL_SCRIPT).digest('base64')}'; connect-src 'self'; style-src 'unsafe-inline'; img-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'`;

function control(s: AgentStatus, tokenRequired: boolean): string {
  const token = tokenRequired
    ? '<input id="token" type="password" autocomplete="off" placeholder="agent token" aria-label="agent token"> '
    : '';
  const button = s.agent.suspended
    ? '<button name="action" value="resume">Resume</button>'
    : '<button name="action" value="suspend">Suspend</button>';
  return `<form id="control" method="post">${token}${button} <span id="control-note" class="muted"></span></form>`;
}

const DAY = 86_400_000;
const short = (rev: string | undefined) => (rev ? rev.slice(0, 12) : '—');
const value = (v: unknown) => {
  const text = v === undefined ? '(none)' : JSON.stringify(v);
  return text.length > 300 ? `${text.slice(0, 300)}… (${text.length - 300} more)` : text;
};
const ago = (iso: string | undefined, now: number) => {
  if (!iso) return '—';
  const s = Math.round((now - Date.parse(iso)) / 1000);
  if (s < 90) return `${s}s ago`;
  if (s < 5400) return `${Math.round(s / 60)}m ago`;
  if (s < 172800) return `${Math.round(s / 3600)}h ago`;
  return `${Math.round(s / 86400)}d ago`;
};

const CSS = `
:root{--bg:#f6f7f9;--card:#fff;--ink:#1d2330;--muted:#5d6575;--line:#e1e4ea;--ok:#1f8a4c;--warn:#b76e00;--bad:#c62828;--info:#2f5fb3}
*{box-sizing:border-box}body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;background:var(--bg);color:var(--ink)}
header{background:#1d2330;color:#fff;padding:14px 24px;display:flex;gap:24px;align-items:baseline;flex-wrap:wrap}
header h1{font-size:18px;margin:0}header .meta{color:#c5cad6;font-size:13px}
main{padding:16px 24px;display:grid;gap:16px;max-width:1280px}
section{background:var(--card);border:1px solid var(--line);border-radius:8px;padding:14px 16px}
h2{font-size:15px;margin:0 0 10px}table{border-collapse:collapse;width:100%}
th,td{text-align:left;padding:6px 8px;border-bottom:1px solid var(--line);vertical-align:top}th{color:var(--muted);font-weight:600;font-size:12px;text-transform:uppercase;letter-spacing:.03em}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12.5px;word-break:break-all}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;font-size:12px;font-weight:600;color:#fff}
.ok{background:var(--ok)}.warn{background:var(--warn)}.bad{background:var(--bad)}.info{background:var(--info)}.muted{color:var(--muted)}
.cards{display:grid;grid-template-columns:repeat(auto-fill,minmax(180px,1fr));gap:12px}
.card{border:1px solid var(--line);border-radius:8px;padding:10px 12px}.card .n{font-size:22px;font-weight:700}
.before{color:var(--bad)}.after{color:var(--ok)}.err{color:var(--bad);white-space:pre-wrap}
svg text{font:11px system-ui,sans-serif;fill:var(--muted)}
body{overflow-wrap:break-word}.err,.mono{white-space:pre-wrap}.card .sub{font-size:12px}
#control{display:flex;flex-wrap:wrap;gap:6px;align-items:center}#control input{min-width:0;max-width:100%}
@media (max-width:640px){
header{padding:10px 12px;gap:6px 16px}main{padding:10px;gap:10px}section{padding:10px}
.cards{grid-template-columns:repeat(2,minmax(0,1fr));gap:8px}.card .n{font-size:17px}
table,thead,tbody,tr,th,td{display:block;width:100%}thead{display:none}
tr{border-bottom:1px solid var(--line);padding:6px 0}td{border:0;padding:2px 0}
td[data-label]::before{content:attr(data-label) ": ";color:var(--muted);font-size:12px}
table.fields tr{border:0;padding:0}table.fields td{display:inline;padding:0 4px 0 0}
}
`;

function badge(text: string, cls: string): string {
  return `<span class="badge ${cls}">${esc(text)}</span>`;
}

function resultBadge(r: ReconcileRecord['result']): string {
  return badge(r, r === 'success' ? 'ok' : r === 'locked' || r === 'interrupted' ? 'warn' : 'bad');
}

const fieldTable = (fields: readonly { path: string; before: unknown; after: unknown }[]) =>
  fields.length
    ? `<table class="fields"><tbody>${fields.map((f) => `<tr><td><code>${esc(f.path)}</code></td><td class="before mono">${esc(value(f.before))}</td><td>→</td><td class="after mono">${esc(value(f.after))}</td></tr>`).join('')}</tbody></table>`
    : '';

/** Every change made outside kms-sync that the agent undid (kept across restarts), newest first. */
function healRows(s: AgentStatus, now: number): string {
  if (s.heals.length === 0) return '<p class="muted">No heal yet: nothing changed outside kms-sync was undone.</p>';
  const rows = s.heals
    .slice(0, 50)
    .map(
      (h) =>
        `<tr class="heal"><td data-label="Healed" title="${esc(h.lastAt)}">${esc(ago(h.lastAt, now))}${h.count > 1 ? ` <span class="muted">(${esc(h.count)}×, first ${esc(ago(h.at, now))})</span>` : ''}</td>` +
        `<td><code>${esc(h.address)}</code><div class="muted">${esc(h.action)}: ${esc(h.reason)}</div>${fieldTable(h.fields)}</td><td data-label="Revision"><code>${esc(short(h.revision))}</code></td></tr>`,
    );
  const more = s.heals.length > 50 ? `<p class="muted">…and ${s.heals.length - 50} more (see /api/status).</p>` : '';
  return `<table id="heals"><thead><tr><th>When</th><th>Resource (found → restored)</th><th>Revision</th></tr></thead><tbody>${rows.join('')}</tbody></table>${more}`;
}

/** What the agent owns (its inventory), by kind, with the first entries. */
function inventoryRows(s: AgentStatus): string {
  const inv = s.inventory;
  if (!inv) return '<p class="muted">No inventory yet (made at the first reconcile that reads the service).</p>';
  const kinds = Object.entries(inv.byKind)
    .map(([k, n]) => `${esc(k)} ${esc(n)}`)
    .join(', ');
  const shown = inv.entries.slice(0, 200);
  return (
    `<p id="inventory-count">${esc(inv.count)} resource(s) owned${kinds ? ` <span class="muted">(${kinds})</span>` : ''}, as of revision <code>${esc(short(inv.revision))}</code>.</p>` +
    `<details><summary>Entries</summary><div class="mono">${shown.map((e) => esc(e.address)).join('<br>')}${inv.count > shown.length ? `<br>… ${esc(inv.count - shown.length)} more (see /api/status)` : ''}</div></details>`
  );
}

function envRows(envs: EnvStatus[], unknown: boolean): string {
  if (envs.length === 0) return '<p class="muted">No environment reconciled yet.</p>';
  const rows = envs.map((e) => {
    const cats = Object.entries(e.byCategory)
      .map(([c, n]) => `${esc(c)} ${n}`)
      .join(', ');
    return (
      `<tr data-env="${esc(e.projectEnv)}"><td><code>${esc(e.projectEnv)}</code></td><td>${unknown ? badge('Unknown', 'warn') : e.synced ? badge('Synced', 'ok') : badge('OutOfSync', 'warn')}</td>` +
      `<td data-label="Drift items">${e.drift}${cats ? ` <span class="muted">(${cats})</span>` : ''}</td><td data-label="Keys expiring ≤ 7 d">${e.expiring7d ? badge(String(e.expiring7d), 'bad') : '0'}</td><td data-label="≤ 30 d">${e.expiring30d ? badge(String(e.expiring30d), 'warn') : '0'}</td></tr>`
    );
  });
  return `<table id="environments"><thead><tr><th>Environment</th><th>State</th><th>Drift items</th><th>Keys expiring ≤ 7 d</th><th>≤ 30 d</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

function historyRows(history: HistoryRow[], now: number): string {
  if (history.length === 0) return '<p class="muted">No reconcile yet.</p>';
  // Repeats folded into one row: "× 5, since 20 min ago" (the first of them).
  const times = (h: HistoryRow) =>
    h.count > 1
      ? ` <span class="muted" data-count="${h.count}">× ${h.count}, since ${esc(ago(h.firstStartedAt, now))}</span>`
      : '';
  const rows = history.map(
    (h) =>
      `<tr><td title="${esc(h.count > 1 ? `${h.firstStartedAt} … ${h.finishedAt}` : h.finishedAt)}">${esc(ago(h.finishedAt, now))}${times(h)}</td><td><code>${esc(short(h.revision))}</code> <span class="muted">${esc(h.subject ?? '')}</span></td>` +
      `<td data-label="Trigger">${esc(h.trigger)}</td><td>${resultBadge(h.result)}</td><td data-label="Applied / planned">${h.applied}/${h.planned}</td><td data-label="Took">${esc(h.durationMs)} ms</td>` +
      `<td>${h.syncWindowOverride ? `${badge('sync window overridden', 'warn')} ` : ''}${h.errors.length ? `<div class="err">${h.errors.slice(0, 5).map(esc).join('\n')}</div>` : `<span class="muted">${esc(h.note ?? '')}</span>`}</td></tr>`,
  );
  return `<table id="history"><thead><tr><th>When</th><th>Revision</th><th>Trigger</th><th>Outcome</th><th>Applied / planned</th><th>Took</th><th>Errors / note</th></tr></thead><tbody>${rows.join('')}</tbody></table>`;
}

function driftRows(s: AgentStatus): string {
  // What the last successful read found is stale while the service cannot be read: never shown as "no drift".
  if (s.serviceError)
    return `<p>${badge('Unknown', 'warn')} The service could not be read at the last reconcile; the drift below is from the last reconcile that could.</p>${s.drift.length ? driftTable(s) : ''}`;
  if (s.drift.length === 0) return '<p class="muted">No drift: the live service matches the configuration.</p>';
  return driftTable(s);
}

function driftTable(s: AgentStatus): string {
  const rows = s.drift.slice(0, 200).map((d) => {
    const fields = fieldTable(d.fields);
    return (
      `<tr class="drift-item"><td>${badge(d.category, d.category === 'unmanaged' ? 'info' : d.category === 'expiring' ? 'warn' : 'bad')}</td><td><code>${esc(d.address)}</code><div class="muted">${esc(d.detail)}</div>${fields}</td>` +
      `<td data-label="Apply would">${esc(d.action ?? 'none')}</td></tr>`
    );
  });
  const more = s.drift.length > 200 ? `<p class="muted">…and ${s.drift.length - 200} more (see /api/status).</p>` : '';
  return `<table id="drift"><thead><tr><th>Category</th><th>Resource (live → desired)</th><th>Apply would</th></tr></thead><tbody>${rows.join('')}</tbody></table>${more}`;
}

/** The timeline: one row per environment, past rotations and issues left of "now", key expiries right of it. */
export function timelineSvg(expiries: KeyExpiry[], events: TimelineEvent[], now: number): string {
  const from = now - 30 * DAY;
  const lastExpiry = expiries.reduce((m, e) => Math.max(m, Date.parse(e.expiresAt) || 0), 0);
  const to = Math.max(now + 90 * DAY, Math.min(lastExpiry + 7 * DAY, now + 400 * DAY));
  const envs = [...new Set([...expiries.map((e) => e.projectEnv), ...events.map((e) => e.projectEnv)])].sort();
  const left = 170;
  const width = 960;
  const right = width - 20;
  const rowH = 26;
  const top = 34;
  const height = top + Math.max(1, envs.length) * rowH + 34;
  const x = (t: number) => left + ((Math.min(Math.max(t, from), to) - from) / (to - from)) * (right - left);
  const parts: string[] = [];
  // Month ticks.
  const d = new Date(from);
  d.setUTCDate(1);
  d.setUTCHours(0, 0, 0, 0);
  for (let t = d.getTime(); t <= to; d.setUTCMonth(d.getUTCMonth() + 1), t = d.getTime()) {
    if (t < from) continue;
    parts.push(
      `<line x1="${x(t).toFixed(1)}" y1="${top - 8}" x2="${x(t).toFixed(1)}" y2="${height - 26}" stroke="#e1e4ea"/>`,
      `<text x="${(x(t) + 3).toFixed(1)}" y="${top - 12}">${esc(d.toISOString().slice(0, 7))}</text>`,
    );
  }
  envs.forEach((env, i) => {
    const y = top + i * rowH + rowH / 2;
    parts.push(
      `<text x="8" y="${y + 4}">${esc(env.length > 26 ? `${env.slice(0, 25)}…` : env)}</text>`,
      `<line x1="${left}" y1="${y}" x2="${right}" y2="${y}" stroke="#eef0f4"/>`,
    );
    for (const e of expiries.filter((k) => k.projectEnv === env)) {
      const t = Date.parse(e.expiresAt);
      const days = (t - now) / DAY;
      const color = days < 0 ? '#7a1010' : days <= 7 ? '#c62828' : days <= 30 ? '#b76e00' : '#1f8a4c';
      const cx = x(t);
      parts.push(
        `<path class="expiry" d="M${cx.toFixed(1)} ${y - 7} l7 7 l-7 7 l-7 -7 z" fill="${color}"><title>${esc(`${e.address} expires ${e.expiresAt}${e.autoRotate ? ' (auto-rotates)' : ''}`)}</title></path>`,
      );
    }
    for (const ev of events.filter((k) => k.projectEnv === env)) {
      const color =
        ev.kind === 'rotated'
          ? '#2f5fb3'
          : ev.kind === 'revoked'
            ? '#5d6575'
            : ev.kind === 'healed'
              ? '#0f7f86'
              : '#6a3fb3';
      parts.push(
        `<circle class="event" cx="${x(Date.parse(ev.at)).toFixed(1)}" cy="${y}" r="5" fill="${color}"><title>${esc(`${ev.address} ${ev.kind} ${ev.at}${ev.revision ? ` (revision ${ev.revision.slice(0, 12)})` : ''}`)}</title></circle>`,
      );
    }
  });
  if (envs.length === 0)
    parts.push(`<text x="${left}" y="${top + rowH / 2 + 4}">No key with an expiry, no rotation yet.</text>`);
  const nx = x(now).toFixed(1);
  parts.push(
    `<line x1="${nx}" y1="${top - 8}" x2="${nx}" y2="${height - 26}" stroke="#1d2330" stroke-dasharray="4 3"/>`,
    `<text x="${(Number(nx) + 4).toFixed(1)}" y="${height - 28}" style="fill:#1d2330">now</text>`,
  );
  const legend = [
    ['#2f5fb3', 'rotated'],
    ['#6a3fb3', 'issued'],
    ['#0f7f86', 'healed'],
    ['#c62828', 'expires ≤ 7 d'],
    ['#b76e00', '≤ 30 d'],
    ['#1f8a4c', 'later'],
  ];
  for (const [i, [c, label]] of legend.entries())
    parts.push(
      `<rect x="${left + i * 120}" y="${height - 16}" width="10" height="10" fill="${c}"/><text x="${left + i * 120 + 14}" y="${height - 7}">${esc(label)}</text>`,
    );
  return `<svg id="timeline" role="img" aria-label="Key expiries and rotations" viewBox="0 0 ${width} ${height}" width="100%" xmlns="http://www.w3.org/2000/svg">${parts.join('')}</svg>`;
}

export function renderPage(s: AgentStatus, now: number = Date.now(), o: { tokenRequired?: boolean } = {}): string {
  const last = s.lastReconcile;
  const cards = [
    ['Mode', `${s.agent.mode}${s.agent.prune ? ' + prune' : ''}`],
    ['Synced revision', short(s.revision.synced)],
    ['Last reconcile', last ? `${last.result}, ${ago(last.finishedAt, now)}` : '—'],
    ['Drift items', s.serviceError ? 'Unknown' : String(s.drift.length)],
    ['Ready', s.condition?.status ?? 'Unknown', s.condition?.reason],
    ['Keys expiring ≤ 7 d / 30 d', `${s.keys.expiring7d} / ${s.keys.expiring30d}`],
  ]
    .map(
      ([k, v, sub]) =>
        `<div class="card"><div class="muted">${esc(k)}</div><div class="n">${esc(v)}</div>${sub ? `<div class="sub muted">${esc(sub)}</div>` : ''}</div>`,
    )
    .join('');
  const alerts: string[] = [];
  if (!s.agent.syncWindowOpen)
    alerts.push(
      `<p>${badge('Outside the sync window', 'warn')} Changes are reported, not applied, until one opens (${esc(s.agent.syncWindows.join('; '))}, UTC).</p>`,
    );
  if (s.agent.suspended)
    alerts.push(`<p>${badge('Suspended', 'warn')} Reconciliation is paused until it is resumed.</p>`);
  if (s.serviceError)
    alerts.push(
      `<p id="service-unreachable">${badge('Service unreachable', 'bad')} <span class="err">${esc(s.serviceError)}</span> <span class="muted">Sync states and drift are unknown until it answers again.</span></p>`,
    );
  if (s.journalKeysWaiting)
    alerts.push(
      `<p id="journal-waiting">${badge('Keys in the journal', 'bad')} ${esc(s.journalKeysWaiting)} issued key(s) wait in the journal for their secret store; the agent is degraded until they are stored.</p>`,
    );
  if (s.sourceError)
    alerts.push(
      `<p>${badge('Source unreachable', 'bad')} <span class="err">${esc(s.sourceError)}</span> <span class="muted">Keeping revision ${esc(short(s.revision.lastGood))}.</span></p>`,
    );
  if (s.heldDeletes) {
    alerts.push(
      `<div id="held">${badge('Deletes held', 'bad')} ${esc(s.heldDeletes.reason)}; revision <code>${esc(short(s.heldDeletes.revision))}</code> is applied without them until approved (POST /api/approve-deletes).` +
        `<div class="mono">${s.heldDeletes.operations
          .slice(0, 20)
          .map((d) => esc(d.address))
          .join('\n')}${s.heldDeletes.operations.length > 20 ? '\n…' : ''}</div></div>`,
    );
  }
  if (s.requiresPruning?.length) {
    alerts.push(
      `<div id="requires-pruning">${badge('Requires pruning', 'warn')} ${esc(s.requiresPruning.length)} resource(s) left the configuration and are kept (the agent runs without --prune).` +
        `<div class="mono">${s.requiresPruning
          .slice(0, 20)
          .map((d) => esc(d.address))
          .join('\n')}${s.requiresPruning.length > 20 ? '\n…' : ''}</div></div>`,
    );
  }
  if (s.revision.invalid) {
    alerts.push(
      `<div id="invalid">${badge('Invalid revision', 'bad')} <code>${esc(short(s.revision.invalid.revision))}</code> is not applied; keeping <code>${esc(short(s.revision.lastGood))}</code>.` +
        `<div class="err mono">${s.revision.invalid.errors.slice(0, 20).map(esc).join('\n')}</div></div>`,
    );
  }
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><meta http-equiv="refresh" content="15">
<title>kms-sync agent</title><style>${CSS}</style></head>
<body><header><h1>kms-sync agent</h1><span class="meta">${esc(s.agent.repo)} @ ${esc(s.agent.ref)} — ${esc(s.agent.path || '.')}</span>
<span class="meta">every ${esc(s.agent.intervalSeconds)} s · up since ${esc(s.agent.startedAt)}</span></header>
<main>
<section><div class="cards">${cards}</div><div style="margin-top:10px">${control(s, o.tokenRequired ?? false)}</div>${alerts.length ? `<div style="margin-top:10px">${alerts.join('')}</div>` : ''}</section>
<section><h2>Environments</h2>${envRows(s.environments, s.serviceError !== undefined)}</section>
<section><h2>Key expiries and rotations</h2>${timelineSvg(s.keys.expiries, s.timeline, now)}</section>
<section><h2>Current drift</h2>${driftRows(s)}</section>
<section><h2>Heals</h2>${healRows(s, now)}</section>
<section><h2>Inventory</h2>${inventoryRows(s)}</section>
<section><h2>Last revisions</h2>${historyRows(s.history, now)}</section>
</main><script>${CONTROL_SCRIPT}</script></body></html>
`;
}
