// The one escaping of text that comes from the service or a configuration (names, addresses,
// values, reasons that quote them) before it is printed to a terminal or a CI log. Hostile text
// must not move the cursor, retitle the window, recolour or erase lines, reorder what follows
// (bidi overrides), start a new line (and with it a GitHub workflow command such as `::error` or
// `::add-mask::`), or hide characters. Escapes use JSON's spelling (`\n`, `\u001b`), so a value
// printed in quotes reads as the JSON string it is.

/** C0 and C1 controls, DEL, bidi marks/overrides/isolates, line/paragraph separators, zero-width characters, BOM, lone surrogates. */
const UNSAFE =
  /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;
const SHORT: Record<string, string> = { '\b': '\\b', '\f': '\\f', '\n': '\\n', '\r': '\\r', '\t': '\\t' };

const hex = (c: string) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`;

/**
 * Text safe to print on one line of a terminal or CI log: controls, escape sequences, bidi and
 * invisible characters escaped (`\u001b`, `\n`, `\u202e`); backslashes doubled so an escape can
 * never be faked; `##[` (the old workflow-command form, recognised anywhere in a line) broken.
 */
export function printable(text: string): string {
  return escapeUnsafe(text.replace(/\\/g, '\\\\'));
}

/**
 * printable without doubling backslashes: for text that already spells its values escaped (a
 * diagnostic quoting a JSON string), so `"a\"b"` stays readable. Everything else is the same.
 */
export function escapeUnsafe(text: string): string {
  return text.replace(UNSAFE, (c) => SHORT[c] ?? hex(c)).replace(/##\[/g, '#\\u0023[');
}

/** A string value in double quotes, escaped like printable (and `"`): JSON's spelling for ordinary text. */
export function quoted(text: string): string {
  return `"${printable(text).replace(/"/g, '\\"')}"`;
}

/** Cuts long text (error lines): the first `max` characters and how many more there were. */
export function cut(text: string, max = 200): string {
  if (text.length <= max) return text;
  return `${text.slice(0, max)}… (${text.length - max} more)`;
}

/** Quoted strings (JSON spelling) and unbroken runs longer than this are cut in error lines. */
export const ERROR_VALUE_MAX = 200;

/**
 * Error text with every long value cut (`"xxxx…" (69800 more)`): JSON-quoted strings and unbroken
 * runs of more than ERROR_VALUE_MAX characters, so a 70,000-character value is not echoed whole on
 * every line that names it; the rest of each line (where, what is wrong) is kept. One pass over the
 * text, no backtracking regular expression: a quoted value of 16 MB is cut like one of 16 KB (a
 * regex with a repeated group overflowed V8's stack from 8 MB on, issue 42).
 */
export function cutLongValues(text: string, max = ERROR_VALUE_MAX): string {
  return cutLongRuns(cutLongQuoted(text, max), max);
}

/** Line terminators that end a JSON escape's `.` (what a `\` may not be followed by). */
const isLineEnd = (c: number) => c === 0x0a || c === 0x0d || c === 0x2028 || c === 0x2029;

/**
 * `"body"` with more than `max` characters or escapes in the body (no newline, `\` escapes one
 * character) → `"first max…" (n more)`. A start whose string never closes fails at one place, and
 * every quote before that place (each inside an escape) fails there too, so the scan resumes there.
 */
function cutLongQuoted(text: string, max: number): string {
  let out = '';
  let copied = 0;
  let i = text.indexOf('"');
  while (i >= 0 && i < text.length) {
    let j = i + 1;
    let units = 0;
    let closed = false;
    while (j < text.length) {
      const c = text.charCodeAt(j);
      if (c === 0x22) {
        closed = true;
        break;
      }
      if (c === 0x0a) break;
      if (c === 0x5c) {
        if (j + 1 >= text.length || isLineEnd(text.charCodeAt(j + 1))) break;
        j += 2;
      } else j++;
      units++;
    }
    if (!closed) {
      i = j >= text.length ? -1 : text.indexOf('"', j + 1);
      continue;
    }
    if (units <= max) {
      i = j; // the closing quote may open the next string
      continue;
    }
    const body = text.slice(i + 1, j);
    out += `${text.slice(copied, i)}"${body.slice(0, max)}…" (${body.length - max} more)`;
    copied = j + 1;
    i = text.indexOf('"', copied);
  }
  return copied === 0 ? text : out + text.slice(copied);
}

/** Unbroken runs (no white space, quote or `…`) longer than `max` → the first `max` and a count. */
function cutLongRuns(text: string, max: number): string {
  let out = '';
  let copied = 0;
  let start = 0;
  // One pass by hand: even `[^\s"…]{201,}` overflows V8's regex stack on a 16 MB run.
  for (let i = 0; i <= text.length; i++) {
    if (i < text.length && !breaksRun(text.charCodeAt(i))) continue;
    if (i - start > max) {
      out += `${text.slice(copied, start + max)}… (${i - start - max} more)`;
      copied = i;
    }
    start = i + 1;
  }
  return copied === 0 ? text : out + text.slice(copied);
}

/** White space as `\s` means it, a double quote, or `…`. */
function breaksRun(c: number): boolean {
  if (c === 0x22 || c === 0x2026 || c === 0x20 || (c >= 0x09 && c <= 0x0d)) return true;
  if (c < 0xa0) return false;
  return (
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000 ||
    c === 0xfeff
  );
}

/** The characters guardOutput escapes (controls but tab and newline, bidi and invisible ones). */
const GUARDED_CHARS =
  '[\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f\\u061c\\u200b-\\u200f\\u2028-\\u202e\\u2060-\\u2069]';
/** What guardOutput replaces: colour (SGR) and the progress line's `\r` + erase-line, kept as they are, and GUARDED_CHARS, escaped. */
const GUARDED = new RegExp(`\\r\\x1b\\[2K|\\x1b\\[[0-9;]{0,12}m|${GUARDED_CHARS}`, 'g');
/** What guardOutput can change, found anywhere: whatever it changes in a piece of a text, this finds in the whole. */
const GUARD_HINT = new RegExp(`${GUARDED_CHARS}|##\\[|::`);

/**
 * The last guard of every line written to stdout/stderr (cli/output.ts): a line whose first
 * non-blank characters are `::` would be a GitHub workflow command, so it is prefixed with a
 * backslash; `##[` is broken wherever it appears. Escape sequences other than colour (SGR) and the
 * progress line's `\r` + erase-line are escaped, as are the other controls and bidi characters.
 * Our own text never needs more; whatever hostile text a renderer forgot is defused here.
 */
export function guardOutput(text: string): string {
  return text
    .replace(GUARDED, (m) => (m.length > 1 ? m : hex(m)))
    .replace(/##\[/g, '#\\u0023[')
    .replace(/^([ \t]*)::/gm, '$1\\::');
}

/** Whether guardOutput may change some piece of `text` (false: it leaves every piece as it is). */
export const mayGuard = (text: string): boolean => GUARD_HINT.test(text);
