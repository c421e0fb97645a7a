// The provider's pages in the Terraform registry's layout, generated from the provider schema
// (schemas/terraform-provider-kms.json) and the example configurations the tests run, so that
// neither can drift from what the provider serves:
//   docs/index.md                      the provider and its block
//   docs/resources/<name>.md           kms_<name>: example, schema, import
//   docs/data-sources/<name>.md
//   docs/ephemeral-resources/<name>.md
//   npm run docs:provider             rewrite the pages
//   npm run docs:provider -- --check  exit 1 when a committed page differs
// test/docs/provider-docs.test.ts fails when they differ, checks every import id against the
// provider's own parser, and validates the data-source examples with terraform.
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
export const SCHEMA_FILE = path.join(root, 'schemas', 'terraform-provider-kms.json');
const DOCS = path.join(root, 'docs');
export const KINDS = {
  resources: 'Resource',
  'data-sources': 'Data Source',
  'ephemeral-resources': 'Ephemeral Resource',
} as const;
type Kind = keyof typeof KINDS;

/** Where the example of each kind of block is taken from (files the tests run or validate). */
const EXAMPLES: Record<Kind | 'provider', string> = {
  provider: 'examples/terraform/main.tf',
  resources: 'examples/terraform/main.tf',
  'data-sources': 'examples/terraform/data-sources/main.tf',
  'ephemeral-resources': 'examples/terraform/ephemeral/main.tf',
};

/**
 * One import id per resource type, in the id format of its description: each is parsed by the
 * provider's own parseImportId in the test, so a format change shows here.
 */
export const IMPORT_IDS: Record<string, string> = {
  kms_project: 'acme',
  kms_environment: 'acme-production',
  kms_template: 'acme-production/gold',
  kms_client: 'acme-production/globex',
  kms_key: 'acme-production/globex/primary',
  kms_endpoint: 'acme-production/GET:/v1/orders',
};

interface Attribute {
  type?: unknown;
  nested_type?: { attributes: Record<string, Attribute>; nesting_mode: string };
  description?: string;
  required?: boolean;
  optional?: boolean;
  computed?: boolean;
  sensitive?: boolean;
  write_only?: boolean;
  deprecated?: boolean;
}
interface Block {
  attributes?: Record<string, Attribute>;
  block_types?: Record<string, { nesting_mode: string; block: Block; min_items?: number; max_items?: number }>;
  description?: string;
}
interface Schema {
  block: Block;
}
export interface ProviderSchema {
  provider: Schema;
  resource_schemas: Record<string, Schema>;
  data_source_schemas: Record<string, Schema>;
  ephemeral_resource_schemas?: Record<string, Schema>;
}

export function readSchema(file = SCHEMA_FILE): ProviderSchema {
  return Object.values(
    (JSON.parse(readFileSync(file, 'utf8')) as { provider_schemas: Record<string, ProviderSchema> }).provider_schemas,
  )[0]!;
}

const TYPE_NAMES: Record<string, string> = { string: 'String', number: 'Number', bool: 'Boolean', dynamic: 'Dynamic' };
function typeName(t: unknown): string {
  if (typeof t === 'string') return TYPE_NAMES[t] ?? t;
  if (Array.isArray(t)) {
    const [kind, arg] = t as [string, unknown];
    if (kind === 'object') return 'Object';
    if (kind === 'tuple') return 'Tuple';
    return `${kind[0]!.toUpperCase()}${kind.slice(1)} of ${typeName(arg)}`;
  }
  return 'Dynamic';
}

/** Markdown text from a schema description: <placeholders> stay visible. */
const prose = (s: string | undefined) => (s ?? '').replace(/</g, '&lt;').replace(/>/g, '&gt;');

/** The first top-level block `<keyword> "<type>" …{ … }` of an example file, as written there. */
export function exampleBlock(
  file: string,
  keyword: string,
  type?: string,
): { text: string; name?: string } | undefined {
  const lines = readFileSync(path.join(root, file), 'utf8').split('\n');
  const head = new RegExp(`^${keyword}(?: "${type ?? '[^"]+'}")?(?: "([^"]+)")? \\{\\s*$`);
  const start = lines.findIndex((l) => head.test(l));
  if (start < 0) return undefined;
  const end = lines.findIndex((l, i) => i > start && l === '}');
  const name = head.exec(lines[start]!)![1];
  return { text: lines.slice(start, end + 1).join('\n'), ...(name ? { name } : {}) };
}

/** Required / Optional / Read-Only lists of a block, and its nested blocks and attributes after them. */
function schemaSection(block: Block, heading = '## Schema'): string[] {
  const out: string[] = [heading, ''];
  const nested: [string, Block, string][] = [];
  const line = (name: string, a: Attribute) => {
    const tags = [
      a.nested_type
        ? `Attributes ${a.nested_type.nesting_mode === 'single' ? '' : `${a.nested_type.nesting_mode[0]!.toUpperCase()}${a.nested_type.nesting_mode.slice(1)}`}`.trim()
        : typeName(a.type),
    ];
    if (a.sensitive) tags.push('Sensitive');
    if (a.write_only) tags.push('Write-only');
    if (a.deprecated) tags.push('Deprecated');
    if (a.nested_type) nested.push([name, { attributes: a.nested_type.attributes }, 'attributes']);
    return `- \`${name}\` (${tags.join(', ')})${a.description ? ` ${prose(a.description)}` : ''}`;
  };
  const attrs = Object.entries(block.attributes ?? {});
  const blocks = Object.entries(block.block_types ?? {});
  const groups: [string, (a: Attribute) => boolean][] = [
    ['Required', (a) => Boolean(a.required)],
    ['Optional', (a) => Boolean(a.optional)],
    ['Read-Only', (a) => Boolean(a.computed) && !a.optional && !a.required],
  ];
  for (const [title, test] of groups) {
    const items = attrs
      .filter(([, a]) => test(a))
      .sort(([x], [y]) => x.localeCompare(y))
      .map(([n, a]) => line(n, a));
    if (title === 'Optional') {
      for (const [n, bt] of blocks.sort(([x], [y]) => x.localeCompare(y))) {
        const count =
          bt.max_items === 1 || bt.nesting_mode === 'single' || bt.nesting_mode === 'group'
            ? 'at most one'
            : bt.min_items
              ? `at least ${bt.min_items}`
              : 'any number';
        items.push(
          `- \`${n}\` (Block ${bt.nesting_mode[0]!.toUpperCase()}${bt.nesting_mode.slice(1)}, ${count}) ${prose(bt.block.description)} See [below for nested schema](#nestedblock--${n}).`.replace(
            / {2,}/g,
            ' ',
          ),
        );
        nested.push([n, bt.block, 'block']);
      }
    }
    if (items.length) out.push(`### ${title}`, '', ...items, '');
  }
  for (const [n, b, what] of nested) {
    out.push(
      `<a id="nested${what}--${n}"></a>`,
      ...schemaSection(b, `### Nested Schema for \`${n}\``).map((l) =>
        l.startsWith('### ') && !l.startsWith('### Nested') ? `#${l}` : l,
      ),
    );
  }
  return out;
}

const front = (title: string, description: string | undefined) => [
  '---',
  `page_title: "${title} - terraform-provider-kms"`,
  'subcategory: ""',
  'description: |-',
  `  ${(description ?? '').split('\n').join('\n  ')}`,
  '---',
  '',
  '<!-- Generated by `npm run docs:provider` from schemas/terraform-provider-kms.json and examples/terraform/: edit those, not this page. -->',
  '',
];

function hcl(text: string, marker: 'run' | 'illustration' = 'illustration'): string[] {
  return [`<!-- example: ${marker} -->`, '```hcl', text, '```', ''];
}

function page(kind: Kind, type: string, s: Schema): string {
  const keyword = kind === 'resources' ? 'resource' : kind === 'data-sources' ? 'data' : 'ephemeral';
  const example = exampleBlock(EXAMPLES[kind], keyword, type);
  const out = [
    ...front(`${type} ${KINDS[kind]}`, s.block.description),
    `# ${type} (${KINDS[kind]})`,
    '',
    prose(s.block.description),
    '',
  ];
  if (example) {
    out.push('## Example Usage', '', `From [${EXAMPLES[kind]}](../../${EXAMPLES[kind]}):`, '', ...hcl(example.text));
  }
  out.push(...schemaSection(s.block));
  const id = IMPORT_IDS[type];
  if (kind === 'resources' && id) {
    const address = `${type}.${example?.name ?? 'example'}`;
    const format = s.block.description?.match(/Import id: (.+?)\.?$/)?.[1];
    out.push(
      '## Import',
      '',
      `${format ? `Import id: ${prose(format)}. ` : ''}With an \`import\` block (\`terraform plan -generate-config-out=generated.tf\` then writes its configuration):`,
      '',
    );
    out.push(...hcl(`import {\n  to = ${address}\n  id = "${id}"\n}`));
    out.push(
      'or on the command line:',
      '',
      '<!-- example: illustration -->',
      '```sh',
      `terraform import ${address} ${id}`,
      '```',
      '',
    );
  }
  return `${out
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trimEnd()}\n`;
}

function indexPage(s: ProviderSchema): string {
  const example = exampleBlock(EXAMPLES.provider, 'provider', 'kms');
  const list = (kind: Kind, m: Record<string, Schema> | undefined) =>
    Object.keys(m ?? {})
      .sort()
      .map((t) => `- [${t}](${kind}/${t.replace(/^kms_/, '')}.md)`);
  const out = [
    ...front('Provider: kms', s.provider.block.description),
    '# kms Provider',
    '',
    prose(s.provider.block.description),
    '',
    'How to install it, how keys reach their store, ownership and rotation: [Terraform provider](terraform-provider.md).',
    '',
    '## Example Usage',
    '',
    `From [${EXAMPLES.provider}](../${EXAMPLES.provider}):`,
    '',
    ...hcl(example!.text),
    ...schemaSection(s.provider.block),
    '## Resources',
    '',
    ...list('resources', s.resource_schemas),
    '',
    '## Data Sources',
    '',
    ...list('data-sources', s.data_source_schemas),
    '',
    '## Ephemeral Resources',
    '',
    ...list('ephemeral-resources', s.ephemeral_resource_schemas),
    '',
  ];
  return `${out
    .join('\n')
    .replace(/\n{3,}/g, '\n\n')
    .trimEnd()}\n`;
}

/** Every generated page: path relative to docs/ → text. */
export function generate(s: ProviderSchema = readSchema()): Map<string, string> {
  const pages = new Map<string, string>([['index.md', indexPage(s)]]);
  const groups: [Kind, Record<string, Schema> | undefined][] = [
    ['resources', s.resource_schemas],
    ['data-sources', s.data_source_schemas],
    ['ephemeral-resources', s.ephemeral_resource_schemas],
  ];
  for (const [kind, m] of groups)
    for (const [type, schema] of Object.entries(m ?? {}))
      pages.set(`${kind}/${type.replace(/^kms_/, '')}.md`, page(kind, type, schema));
  return pages;
}

/** Pages that differ from a fresh generation, are missing, or are left over from a type that is gone. */
export function stalePages(): string[] {
  const fresh = generate();
  const stale = [...fresh]
    .filter(([rel, text]) => !existsSync(path.join(DOCS, rel)) || readFileSync(path.join(DOCS, rel), 'utf8') !== text)
    .map(([rel]) => rel);
  for (const kind of Object.keys(KINDS)) {
    const dir = path.join(DOCS, kind);
    if (existsSync(dir)) for (const f of readdirSync(dir)) if (!fresh.has(`${kind}/${f}`)) stale.push(`${kind}/${f}`);
  }
  return stale.sort();
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const stale = stalePages();
  if (process.argv.includes('--check')) {
    if (stale.length) {
      console.error(
        `docs/: provider pages differ from the schema or examples: ${stale.join(', ')}: run npm run docs:provider`,
      );
      process.exit(1);
    }
    console.log('docs/: provider pages match the schema and examples');
  } else {
    const fresh = generate();
    for (const rel of stale) {
      const file = path.join(DOCS, rel);
      if (!fresh.has(rel)) rmSync(file);
      else {
        mkdirSync(path.dirname(file), { recursive: true });
        writeFileSync(file, fresh.get(rel)!);
      }
    }
    console.log(
      stale.length
        ? `docs/: ${stale.length} provider page(s) written: ${stale.join(', ')}`
        : 'docs/: provider pages up to date',
    );
  }
}
