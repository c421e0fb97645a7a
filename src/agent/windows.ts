// Sync windows (Argo CD's, in their simplest form): when to write. `--sync-window "Mon-Fri
// 08:00-18:00"` (UTC, repeatable); outside every window the agent plans and reports as in detect
// mode and writes nothing, not even a rotation that is due (it happens when a window opens).
const DAYS = ['sun', 'mon', 'tue', 'wed', 'thu', 'fri', 'sat'];

export interface SyncWindow {
  spec: string;
  days: Set<number>;
  /** Minutes after midnight UTC; an end before the start runs past midnight. */
  start: number;
  end: number;
}

export class SyncWindowError extends Error {}

function day(name: string, spec: string): number {
  const i = DAYS.indexOf(name.toLowerCase().slice(0, 3));
  if (i < 0 || name.length < 3)
    throw new SyncWindowError(
      `--sync-window ${JSON.stringify(spec)}: unknown day ${JSON.stringify(name)} (Mon, Tue, … Sun)`,
    );
  return i;
}

function minutes(text: string, spec: string): number {
  const m = /^([01]\d|2[0-3]):([0-5]\d)$/.exec(text) ?? (text === '24:00' ? ['', '24', '00'] : null);
  if (!m)
    throw new SyncWindowError(`--sync-window ${JSON.stringify(spec)}: ${JSON.stringify(text)} is not a time HH:MM`);
  return Number(m[1]) * 60 + Number(m[2]);
}

/** `DAYS HH:MM-HH:MM` with DAYS `*`, `Mon-Fri`, `Sat,Sun` or one day; times in UTC. */
export function parseSyncWindow(spec: string): SyncWindow {
  const m = /^\s*(\S+)\s+(\d\d:\d\d)-(\d\d:\d\d)\s*$/.exec(spec);
  if (!m)
    throw new SyncWindowError(
      `--sync-window ${JSON.stringify(spec)}: expected DAYS HH:MM-HH:MM in UTC, e.g. "Mon-Fri 08:00-18:00" or "* 22:00-02:00"`,
    );
  const days = new Set<number>();
  if (m[1] === '*') for (let i = 0; i < 7; i++) days.add(i);
  else {
    for (const part of m[1]!.split(',')) {
      const [a, b] = part.split('-');
      if (b === undefined) days.add(day(a!, spec));
      else
        for (let i = day(a!, spec), end = day(b, spec); ; i = (i + 1) % 7) {
          days.add(i);
          if (i === end) break;
        }
    }
  }
  const start = minutes(m[2]!, spec);
  const end = minutes(m[3]!, spec);
  if (start === end) throw new SyncWindowError(`--sync-window ${JSON.stringify(spec)}: the window is empty`);
  return { spec: spec.trim(), days, start, end };
}

/** Whether `now` is inside the window (a window past midnight belongs to the day it starts on). */
export function inWindow(w: SyncWindow, now: Date): boolean {
  const t = now.getUTCHours() * 60 + now.getUTCMinutes();
  const today = now.getUTCDay();
  if (w.start < w.end) return w.days.has(today) && t >= w.start && t < w.end;
  return (w.days.has(today) && t >= w.start) || (w.days.has((today + 6) % 7) && t < w.end);
}

/** No window: always open. */
export function windowOpen(windows: readonly SyncWindow[], now: Date): boolean {
  return windows.length === 0 || windows.some((w) => inWindow(w, now));
}
