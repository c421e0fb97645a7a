// The line a YAML indentation mistake is on. When a block line is indented to a column where no
// mapping or list is open, the `yaml` package reports what that breaks further on (a compact
// mapping, a multi-line key, "sequence item without - indicator"), often on another line and with
// the field path of the previous key (`projects[0].name`). Run only on a file the `yaml` package
// refused: this walks the block lines, tracks the open mappings and lists by column, and names the
// first line that fits none of them, with the columns that would fit.

export interface Misindented {
  /** 1-based line and column (the column of the line's first character). */
  line: number;
  column: number;
  /** The key on that line (or "- item"): the field it would be, wherever it belongs. */
  field: string;
  message: string;
}

interface Open {
  indent: number;
  kind: 'map' | 'seq';
  /** The line (1-based) and key or item that opened it, for the message. */
  line: number;
  label: string;
}

// A mapping key: plain (no ": " or " #" inside) or quoted, followed by ":" and a space or the end.
const KEY = /^(?:"(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s#"'[{&*!|>%@`-][^#]*?|-[^\s#][^#]*?)\s*:(?:\s|$)/;

/** What follows `key:` on a line, without a comment. */
const valueAfterKey = (content: string, keyLength: number) =>
  content
    .slice(keyLength)
    .replace(/(^|\s)#.*$/, '')
    .trim();

export function findMisindentedLine(text: string): Misindented | undefined {
  const lines = text.split(/\r?\n/);
  const stack: Open[] = [];
  /** The previous line opened a block (a key without a value, or a lone `-`): it may be followed deeper. */
  let opened: { indent: number; line: number; label: string } | undefined;
  /** Lines deeper than this belong to a block scalar or a multi-line flow value: skipped. */
  let skipDeeperThan: number | undefined;
  for (let n = 0; n < lines.length; n++) {
    const raw = lines[n]!;
    const content = raw.trimStart();
    if (content === '' || content.startsWith('#')) continue;
    if (/^(---|\.\.\.)(\s|$)/.test(raw)) return undefined; // several documents: left to the library
    if (raw.startsWith('\t') || /^ *\t/.test(raw)) return undefined;
    const indent = raw.length - content.length;
    if (skipDeeperThan !== undefined) {
      if (indent > skipDeeperThan) continue;
      skipDeeperThan = undefined;
    }
    const line = n + 1;
    const isItem = content === '-' || content.startsWith('- ');
    const isKey = !isItem && KEY.test(content);
    const fits = (): boolean => {
      const wasOpened = opened;
      opened = undefined;
      if (wasOpened && indent > wasOpened.indent) {
        // The block the previous line opened.
        while (stack.length > 0 && stack[stack.length - 1]!.indent > wasOpened.indent) stack.pop();
        stack.push({ indent, kind: isItem ? 'seq' : 'map', line, label: wasOpened.label });
        return true;
      }
      if (stack.length === 0) {
        stack.push({ indent, kind: isItem ? 'seq' : 'map', line, label: '' });
        return true;
      }
      // Text that is neither a key nor an item, deeper than its block: a multi-line scalar.
      if (!isItem && !isKey && indent > stack[stack.length - 1]!.indent) return true;
      while (stack.length > 0 && stack[stack.length - 1]!.indent > indent) stack.pop();
      const top = stack[stack.length - 1];
      if (!top || top.indent !== indent) return false;
      if (isItem) {
        if (top.kind === 'seq') return true;
        // A list at the column of the key that holds it ("key:" then "- item"): only right after it.
        if (wasOpened && wasOpened.indent === indent) {
          stack.push({ indent, kind: 'seq', line, label: wasOpened.label });
          return true;
        }
        return false;
      }
      if (top.kind === 'map') return true;
      // A key at a list's column closes the list when the mapping holding it is at that column too.
      const below = stack[stack.length - 2];
      if (below && below.indent === indent && below.kind === 'map') {
        stack.pop();
        return true;
      }
      return false;
    };
    const open = [...stack];
    if (!fits()) {
      // The nearest open block's column (a key goes with a mapping's keys, an item with a list's items).
      const want = isItem ? 'seq' : 'map';
      const near = [...open].sort(
        (x, y) =>
          Math.abs(x.indent - indent) - Math.abs(y.indent - indent) ||
          (x.kind === want ? -1 : 0) - (y.kind === want ? -1 : 0) ||
          y.indent - x.indent,
      )[0];
      const what = isItem ? 'this list item' : `"${content.split(':')[0]!.trim()}"`;
      const hint = near
        ? `${near.kind === 'seq' ? `the list that starts on line ${near.line} has its items` : `the mapping that starts on line ${near.line} has its keys`} at indent ${near.indent}: indent it ${near.indent} spaces to belong there`
        : 'no open mapping or list is at that column';
      const isListCol = !isItem && open.some((o) => o.indent === indent && o.kind === 'seq');
      return {
        line,
        column: indent + 1,
        field: content.startsWith('-') ? '(list item)' : content.split(':')[0]!.trim(),
        message: isListCol
          ? `YAML indentation: ${what} is at the column of the list items (indent ${indent}); a key of an item goes under the item's first key, indented ${indent + 2} spaces`
          : `YAML indentation: ${what} is indented ${indent} space(s), a column no open mapping or list uses; ${hint}`,
      };
    }
    // What this line opens for the next ones.
    let rest = content;
    let restIndent = indent;
    while (rest === '-' || rest.startsWith('- ')) {
      const after = rest.slice(1).trimStart();
      restIndent += rest.length - after.length;
      if (after === '' || after.startsWith('#')) {
        opened = { indent: restIndent - (rest.length - after.length), line, label: 'a list item' };
        rest = '';
        break;
      }
      rest = after;
      if (/^[|>]/.test(rest) || (/^[[{]/.test(rest) && !balanced(rest))) {
        skipDeeperThan = indent; // "- |": a block scalar (or a multi-line flow) as the item
        rest = '';
        break;
      }
      // "- key: value": a mapping opens at the item's content column.
      if (KEY.test(rest) || rest.startsWith('- '))
        stack.push({ indent: restIndent, kind: rest.startsWith('-') ? 'seq' : 'map', line, label: 'a list item' });
    }
    const key = KEY.exec(rest);
    if (key) {
      const name = key[0].replace(/\s*:\s*$/, '').trim();
      const value = valueAfterKey(rest, key[0].length);
      if (value === '') opened = { indent: restIndent, line, label: `"${name}:"` };
      else if (/^[|>]/.test(value)) skipDeeperThan = restIndent;
      else if (/^[[{]/.test(value) && !balanced(value)) skipDeeperThan = restIndent;
    } else if (/^[[{]/.test(rest) && !balanced(rest)) skipDeeperThan = indent;
  }
  return undefined;
}

/** Whether a one-line flow value closes its brackets (quotes aside). */
function balanced(s: string): boolean {
  let depth = 0;
  let quote: string | undefined;
  for (const c of s) {
    if (quote) {
      if (c === quote) quote = undefined;
    } else if (c === '"' || c === "'") quote = c;
    else if (c === '[' || c === '{') depth++;
    else if (c === ']' || c === '}') depth--;
  }
  return depth <= 0;
}
