// Reading the documentation the way the docs tests need it: fenced blocks with their example marker,
// the relative links, and the anchors each page offers (GitHub's heading slugs).
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

/** The languages whose blocks must carry a marker, by the family the test checks them as. */
export const CHECKED_LANGUAGES: Record<string, Family> = {
  yaml: 'yaml',
  yml: 'yaml',
  hcl: 'hcl',
  terraform: 'hcl',
  tf: 'hcl',
  ts: 'ts',
  typescript: 'ts',
  sh: 'sh',
  bash: 'sh',
  shell: 'sh',
  console: 'sh',
  zsh: 'sh',
};
export type Family = 'yaml' | 'hcl' | 'ts' | 'sh';

export interface Block {
  file: string; // repository-relative
  line: number; // 1-based line of the opening fence
  lang: string; // the info string's first word, lower-cased ('' when none)
  /** The marker on the line just above the fence: run, illustration, or undefined. */
  marker: string | undefined;
  /** A marker line that is there but says something else (a typo must not pass as unmarked). */
  badMarker?: string;
  text: string;
}

const MARKER = /^<!--\s*example:\s*(\S+)\s*-->$/;
const MARKER_LIKE = /^<!--\s*example\b/;

/** README.md and every Markdown file under docs/, repository-relative, sorted. */
export function docFiles(root: string): string[] {
  const out = ['README.md'];
  const walk = (rel: string) => {
    for (const e of readdirSync(path.join(root, rel), { withFileTypes: true })) {
      const r = path.posix.join(rel, e.name);
      if (e.isDirectory()) walk(r);
      else if (e.isFile() && e.name.endsWith('.md')) out.push(r);
    }
  };
  walk('docs');
  return out.sort();
}

/** Every fenced block of a Markdown text (``` or ~~~, indented fences inside lists too). */
export function fencedBlocks(file: string, text: string): Block[] {
  const lines = text.split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(`{3,}|~{3,})\s*([^`\s]*)/.exec(lines[i]!);
    if (!open) continue;
    const [, indent, fence, info] = open;
    const body: string[] = [];
    let j = i + 1;
    for (; j < lines.length; j++) {
      const l = lines[j]!;
      if (l.trim().startsWith(fence!) && l.trim().replace(/[`~]/g, '') === '') break;
      body.push(l.startsWith(indent!) ? l.slice(indent!.length) : l.trimStart());
    }
    const above = i > 0 ? lines[i - 1]!.trim() : '';
    const m = MARKER.exec(above);
    const block: Block = {
      file,
      line: i + 1,
      lang: (info ?? '').toLowerCase(),
      marker: m?.[1],
      text: body.join('\n') + '\n',
    };
    if (!m && MARKER_LIKE.test(above)) block.badMarker = above;
    if (m && m[1] !== 'run' && m[1] !== 'illustration') block.badMarker = above;
    blocks.push(block);
    i = j;
  }
  return blocks;
}

/** The text with fenced blocks and inline code spans blanked out (links inside code are not links). */
export function proseOnly(text: string): string {
  const lines = text.split('\n');
  let fence: string | undefined;
  const out: string[] = [];
  for (const l of lines) {
    const t = l.trim();
    const f = /^(`{3,}|~{3,})/.exec(t)?.[1];
    if (fence) {
      if (f && t.startsWith(fence) && t.replace(/[`~]/g, '') === '') fence = undefined;
      out.push('');
      continue;
    }
    if (f) {
      fence = f;
      out.push('');
      continue;
    }
    out.push(l);
  }
  // Inline code spans may wrap onto the next line in Markdown; remove them over the whole text.
  return out.join('\n').replace(/(`+)[\s\S]*?\1/g, (s) => s.replace(/[^\n]/g, ' '));
}

/** GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens. */
export function slug(heading: string): string {
  return heading
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');
}

/** The anchors a page offers: heading slugs (with GitHub's -1, -2 for repeats) and <a id/name>. */
export function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  let fence: string | undefined;
  for (const l of text.split('\n')) {
    const t = l.trim();
    const f = /^(`{3,}|~{3,})/.exec(t)?.[1];
    if (fence) {
      if (f && t.startsWith(fence) && t.replace(/[`~]/g, '') === '') fence = undefined;
      continue;
    }
    if (f) {
      fence = f;
      continue;
    }
    const m = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(l);
    if (!m) continue;
    const base = slug(m[1]!.replace(/`/g, '')); // code in a heading keeps its words
    const n = seen.get(base) ?? 0;
    seen.set(base, n + 1);
    out.add(n === 0 ? base : `${base}-${n}`);
  }
  for (const m of text.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) out.add(m[1]!);
  return out;
}

export interface Link {
  file: string;
  line: number;
  target: string;
}

/** Relative links of a page: [text](target) outside code; absolute URLs and mailto: are left out. */
export function relativeLinks(file: string, text: string): Link[] {
  const prose = proseOnly(text);
  const out: Link[] = [];
  for (const m of prose.matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)) {
    const target = m[1]!;
    if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
    out.push({ file, line: prose.slice(0, m.index).split('\n').length, target });
  }
  return out;
}

export function readDoc(root: string, rel: string): string {
  return readFileSync(path.join(root, rel), 'utf8');
}
