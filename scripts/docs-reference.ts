// The configuration reference of docs/configuration.md, generated from the JSON Schema
// (schemas/kms-sync.schema.json) and its descriptions, so that the two cannot drift:
//   npm run docs:reference            rewrite the section between the markers
//   npm run docs:reference -- --check exit 1 when the committed section differs
// test/docs/reference.test.ts fails when the committed page differs from a fresh generation.
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const BEGIN =
  '<!-- BEGIN generated reference: edit schemas/kms-sync.schema.json, then npm run docs:reference -->';
export const END = '<!-- END generated reference -->';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const SCHEMA_FILE = path.join(root, 'schemas', 'kms-sync.schema.json');
export const PAGE_FILE = path.join(root, 'docs', 'configuration.md');

interface Schema {
  title?: string;
  description?: string;
  type?: string;
  $ref?: string;
  const?: unknown;
  enum?: unknown[];
  format?: string;
  pattern?: string;
  patternErrorMessage?: string;
  minLength?: number;
  maxLength?: number;
  minimum?: number;
  maximum?: number;
  default?: unknown;
  examples?: unknown[];
  items?: Schema;
  properties?: Record<string, Schema>;
  required?: string[];
  dependencies?: Record<string, string[]>;
  definitions?: Record<string, Schema>;
}

/** One table of fields: an object of the format, where it sits, and its heading. */
interface Section {
  heading: string;
  where: string;
  schema: Schema;
}

const cell = (s: string) => s.replace(/\|/g, '\\|').replace(/\n+/g, ' ');
// Prose from the schema: <slug> and the like are text, not HTML tags.
const prose = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
const code = (v: unknown) => `\`${typeof v === 'string' ? v : JSON.stringify(v)}\``;
const defName = (ref: string) => ref.replace('#/definitions/', '');

export function renderReference(schema: Schema): string {
  const defs = schema.definitions ?? {};
  const headingOf = new Map<string, string>(); // definition name → heading text (for links)
  const sections: Section[] = [{ heading: 'Top level', where: 'the document itself', schema }];
  const resolve = (s: Schema): Schema => (s.$ref ? { ...defs[defName(s.$ref)], ...s, $ref: s.$ref } : s);

  // Walk the format from the top, in document order, giving each object its own section.
  const visit = (s: Schema, where: string) => {
    for (const [name, raw] of Object.entries(s.properties ?? {})) {
      const target = raw.items ?? raw;
      const resolved = resolve(target);
      if (resolved.type !== 'object' || !resolved.properties) continue;
      const key = target.$ref ? defName(target.$ref) : `${where}${name}`;
      if (headingOf.has(key)) continue;
      const fieldPath = raw.items ? `${where}${name}[]` : `${where}${name}`;
      const heading = resolved.title ?? name;
      headingOf.set(key, heading);
      sections.push({ heading, where: fieldPath, schema: resolved });
      visit(resolved, `${fieldPath}.`);
    }
  };
  visit(schema, '');
  const slug = (h: string) =>
    h
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');

  const typeOf = (raw: Schema, where: string, name: string): string => {
    if (raw.type === 'array' && raw.items) return `list of ${typeOf(raw.items, where, name)}`;
    const s = resolve(raw);
    const key = raw.$ref ? defName(raw.$ref) : `${where ? `${where}.` : ''}${name}`;
    if (s.type === 'object' && headingOf.has(key)) return `[${headingOf.get(key)}](#${slug(headingOf.get(key)!)})`;
    if (s.const !== undefined) return `${s.type ?? ''} ${code(s.const)}`.trim();
    if (s.enum) return `one of ${s.enum.map(code).join(', ')}`;
    if (s.type === 'object') return 'object (any keys)';
    return s.format ? `${s.type} (${s.format})` : (s.type ?? 'any');
  };

  const details = (raw: Schema): string[] => {
    const s = resolve(raw);
    const out: string[] = [];
    const item = s.type === 'array' && s.items ? resolve(s.items) : undefined;
    if (s.patternErrorMessage) out.push(`${s.patternErrorMessage.replace(/^must\b/, 'Must')}.`);
    else if (s.pattern) out.push(`Pattern ${code(s.pattern)}.`);
    if (s.minLength !== undefined && s.minLength > 1) out.push(`At least ${s.minLength} characters.`);
    if (s.maxLength !== undefined) out.push(`At most ${s.maxLength} characters.`);
    if (s.minimum !== undefined) out.push(`At least ${s.minimum}.`);
    if (s.maximum !== undefined) out.push(`At most ${s.maximum}.`);
    if (s.default !== undefined) out.push(`Default ${code(s.default)}.`);
    const examples = s.examples ?? item?.examples;
    if (examples?.length) out.push(`Example${examples.length > 1 ? 's' : ''}: ${examples.map(code).join(', ')}.`);
    return out;
  };

  const lines: string[] = [BEGIN, ''];
  lines.push('Generated from `schemas/kms-sync.schema.json`: change the descriptions there.', '');
  for (const sec of sections) {
    lines.push(`### ${sec.heading}`, '');
    const intro = [sec.where === 'the document itself' ? '' : `\`${sec.where}\`.`, prose(sec.schema.description ?? '')]
      .filter(Boolean)
      .join(' ');
    if (intro) lines.push(intro, '');
    const required = new Set(sec.schema.required ?? []);
    lines.push('| field | type | required | description |', '|---|---|---|---|');
    for (const [name, raw] of Object.entries(sec.schema.properties ?? {})) {
      const s = resolve(raw);
      const needs = sec.schema.dependencies?.[name];
      const req = required.has(name) ? 'yes' : needs ? `needs ${needs.map(code).join(', ')}` : '';
      const where = sec.where === 'the document itself' ? '' : sec.where;
      const text = [
        s.title && s.title !== name ? `**${prose(s.title)}.**` : '',
        prose(raw.description ?? s.description ?? ''),
        ...details(raw),
      ]
        .filter(Boolean)
        .join(' ');
      lines.push(`| \`${name}\` | ${cell(typeOf(raw, where, name))} | ${req} | ${cell(text)} |`);
    }
    lines.push('');
  }
  lines.push(END);
  return lines.join('\n');
}

/** The page with its generated section replaced by `section`. */
export function withReference(page: string, section: string): string {
  const a = page.indexOf(BEGIN);
  const b = page.indexOf(END);
  if (a < 0 || b < a) throw new Error(`${path.relative(root, PAGE_FILE)}: no ${BEGIN} … ${END} markers`);
  return page.slice(0, a) + section + page.slice(b + END.length);
}

export function freshPage(): { current: string; fresh: string } {
  const schema = JSON.parse(readFileSync(SCHEMA_FILE, 'utf8')) as Schema;
  const current = readFileSync(PAGE_FILE, 'utf8');
  return { current, fresh: withReference(current, renderReference(schema)) };
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const { current, fresh } = freshPage();
  const rel = path.relative(process.cwd(), PAGE_FILE);
  if (process.argv.includes('--check')) {
    if (current !== fresh) {
      console.error(`${rel}: the configuration reference differs from the schema: run npm run docs:reference`);
      process.exit(1);
    }
    console.log(`${rel}: the configuration reference matches the schema`);
  } else if (current === fresh) {
    console.log(`${rel}: up to date`);
  } else {
    writeFileSync(PAGE_FILE, fresh);
    console.log(`${rel}: configuration reference regenerated`);
  }
}
