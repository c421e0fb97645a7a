// DesiredState → a CDKTF project (TypeScript stack + cdktf.json + package.json) using the generated
// constructs: the CDKTF twin of the YAML export, so an existing setup can be adopted. Synthesizing
// and planning it against the state it came from shows no changes. Deterministic, known fields
// only: no raw key can leak through.
import type { DesiredClient, DesiredEndpoint, DesiredKey, DesiredState, JsonValue } from '../model/index.js';

export type CdktfFlavour = 'cdktf' | 'cdktn';

export interface CdktfExportOptions {
  flavour?: CdktfFlavour;
  /** Stack name (default `kms`). */
  stack?: string;
  /** Comment lines put at the top of main.ts. */
  header?: string[];
}

const cmp = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

/** Terraform reads `${` and `%{` in every string of the synthesized JSON: escape them. */
function tfString(s: string): string {
  return s.replace(/\$\{/g, '$${').replace(/%\{/g, '%%{');
}

function lit(v: JsonValue, indent = ''): string {
  if (typeof v === 'string') return JSON.stringify(tfString(v));
  if (v === null || typeof v !== 'object') return JSON.stringify(v);
  const inner = `${indent}  `;
  if (Array.isArray(v)) {
    if (v.every((x) => x === null || typeof x !== 'object')) return `[${v.map((x) => lit(x)).join(', ')}]`;
    return `[\n${v.map((x) => `${inner}${lit(x, inner)},`).join('\n')}\n${indent}]`;
  }
  const keys = Object.keys(v).sort(cmp);
  if (keys.length === 0) return '{}';
  return `{\n${keys.map((k) => `${inner}${prop(k)}: ${lit(v[k]!, inner)},`).join('\n')}\n${indent}}`;
}

function prop(k: string): string {
  return /^[A-Za-z_$][\w$]*$/.test(k) ? k : JSON.stringify(k);
}

/** `{ a: 1, b: "x" }` on one line when short, else one property per line. */
function props(entries: Array<[string, string | undefined]>, indent: string): string {
  const kept = entries.filter((e): e is [string, string] => e[1] !== undefined);
  if (kept.length === 0) return '{}';
  const one = `{ ${kept.map(([k, v]) => `${prop(k)}: ${v}`).join(', ')} }`;
  if (one.length <= 100 && !one.includes('\n')) return one;
  return `{\n${kept.map(([k, v]) => `${indent}  ${prop(k)}: ${v},`).join('\n')}\n${indent}}`;
}

const opt = (v: JsonValue | undefined, indent = ''): string | undefined =>
  v === undefined ? undefined : lit(v, indent);

function identifier(base: string, taken: Set<string>): string {
  const words = base.split(/[^A-Za-z0-9]+/).filter(Boolean);
  let id = words.map((w, i) => (i === 0 ? w.toLowerCase() : w[0]!.toUpperCase() + w.slice(1))).join('') || 'resource';
  if (/^\d/.test(id)) id = `_${id}`;
  let candidate = id;
  for (let n = 2; taken.has(candidate); n++) candidate = `${id}${n}`;
  taken.add(candidate);
  return candidate;
}

function keyProps(k: DesiredKey, indent: string): string {
  return props(
    [
      ['ttl', opt(k.ttl)],
      ['expiresAt', opt(k.expiresAt)],
      ['autoRotate', opt(k.autoRotate)],
      ['rotationWindow', opt(k.rotation?.window)],
      ['rotationOverlap', opt(k.rotation?.overlap)],
      ['secretStore', opt(k.secret?.store)],
      ['secretName', opt(k.secret?.name)],
      ['protected', k.protected ? 'true' : undefined],
    ],
    indent,
  );
}

function clientCode(envVar: string, c: DesiredClient): string {
  const i = '  ';
  const keys = c.keys.length
    ? `{\n${[...c.keys]
        .sort((a, b) => cmp(a.name, b.name))
        .map((k) => `${i}    ${prop(tfString(k.name))}: ${keyProps(k, `${i}    `)},`)
        .join('\n')}\n${i}  }`
    : undefined;
  const body = props(
    [
      ['type', opt(c.type)],
      ['template', `${envVar}.template(${JSON.stringify(tfString(c.template))})`],
      ['ipWhitelist', c.ipWhitelist?.length ? lit(c.ipWhitelist as string[]) : undefined],
      ['metadata', c.metadata && Object.keys(c.metadata).length ? lit(c.metadata, `${i}  `) : undefined],
      ['protected', c.protected ? 'true' : undefined],
      ['keys', keys],
    ],
    i,
  );
  return `${envVar}.addClient(${JSON.stringify(tfString(c.name))}, ${body});`;
}

function endpointId(e: DesiredEndpoint): string {
  return `${e.method.toUpperCase()} ${e.path.split('/').filter(Boolean).join('.') || 'root'}`;
}

function endpointCode(envVar: string, e: DesiredEndpoint, explicitId: string | undefined): string {
  const i = '  ';
  const body = props(
    [
      ['id', explicitId === undefined ? undefined : JSON.stringify(explicitId)],
      ['name', opt(e.name)],
      ['description', opt(e.description)],
      ['request', e.request ? lit(e.request, `${i}  `) : undefined],
      ['response', e.response ? lit(e.response, `${i}  `) : undefined],
      ['metadata', e.metadata && Object.keys(e.metadata).length ? lit(e.metadata, `${i}  `) : undefined],
      ['protected', e.protected ? 'true' : undefined],
    ],
    i,
  );
  return `${envVar}.addEndpoint(${JSON.stringify(e.method.toUpperCase())}, ${JSON.stringify(tfString(e.path))}${body === '{}' ? '' : `, ${body}`});`;
}

/** The files of the project: `main.ts`, `cdktf.json`, `package.json` (relative path → text). */
export function desiredStateToCdktf(state: DesiredState, o: CdktfExportOptions = {}): Map<string, string> {
  const flavour = o.flavour ?? 'cdktf';
  const stack = o.stack ?? 'kms';
  const taken = new Set(['app', 'stack']);
  const lines: string[] = [
    ...(o.header ?? []).map((h) => `// ${h}`),
    ...(o.header?.length ? [''] : []),
    `import { App, TerraformStack } from '${flavour}';`,
    `import { ${[...(state.externalProjects?.length ? ['KmsExternalProject'] : []), ...(state.projects.length ? ['KmsProject'] : []), 'KmsProvider'].join(', ')} } from 'kms-sync/${flavour}';`,
    '',
    'const app = new App();',
    `const stack = new TerraformStack(app, ${JSON.stringify(stack)});`,
    '// Service URL and key: KMS_API_URL / KMS_API_KEY. New keys go to the default store (add secretStore blocks to change it).',
    // Which configuration owns what it creates (it changes and deletes only what carries this id).
    `new KmsProvider(stack, 'kms', ${state.owner ? `{ owner: ${JSON.stringify(state.owner)} }` : '{}'});`,
  ];
  // Projects defined here, and projects defined elsewhere (a kms_project data source: an export of
  // some of a project's environments), each with the environments of it the state holds.
  const projects = [
    ...state.projects.map((p) => ({ slug: p.slug, def: p })),
    ...(state.externalProjects ?? []).map((p) => ({ slug: p.slug, def: undefined })),
  ].sort((a, b) => cmp(a.slug, b.slug));
  for (const { slug, def: p } of projects) {
    const pv = identifier(slug, taken);
    if (p) {
      lines.push(
        '',
        `const ${pv} = new KmsProject(stack, ${JSON.stringify(p.slug)}, ${props(
          [
            ['slug', lit(p.slug)],
            ['name', lit(p.name)],
            ['description', opt(p.description)],
            ['protected', p.protected ? 'true' : undefined],
          ],
          '',
        )});`,
      );
    } else {
      lines.push(
        '',
        '// Defined elsewhere: read, never created, renamed or deleted; only the environments below are in scope.',
        `const ${pv} = new KmsExternalProject(stack, ${JSON.stringify(slug)}, { slug: ${lit(slug)} });`,
      );
    }
    for (const e of state.envs.filter((x) => x.project === slug).sort((a, b) => cmp(a.projectEnv, b.projectEnv))) {
      const ev = identifier(e.projectEnv, taken);
      lines.push(
        '',
        `// ${e.projectEnv}`,
        `const ${ev} = ${pv}.addEnvironment(${JSON.stringify(e.type)}, ${props(
          [
            ['url', lit(e.url)],
            ['protected', e.protected ? 'true' : undefined],
          ],
          '',
        )});`,
      );
      for (const t of state.templates
        .filter((x) => x.projectEnv === e.projectEnv)
        .sort((a, b) => cmp(a.name, b.name))) {
        lines.push(
          `${ev}.addTemplate(${JSON.stringify(tfString(t.name))}, ${props(
            [
              ['rateLimitDay', lit(t.rateLimitDay)],
              ['maxClients', opt(t.maxClients)],
              ['protected', t.protected ? 'true' : undefined],
            ],
            '',
          )});`,
        );
      }
      for (const c of state.clients.filter((x) => x.projectEnv === e.projectEnv).sort((a, b) => cmp(a.name, b.name)))
        lines.push(clientCode(ev, c));
      const endpoints = state.endpoints
        .filter((x) => x.projectEnv === e.projectEnv)
        .sort((a, b) => cmp(a.path, b.path) || cmp(a.method, b.method));
      const ids = new Map<string, number>();
      for (const ep of endpoints) ids.set(endpointId(ep), (ids.get(endpointId(ep)) ?? 0) + 1);
      const used = new Map<string, number>();
      for (const ep of endpoints) {
        const id = endpointId(ep);
        // Paths that read alike (/a.b and /a/b) need their own construct ids.
        let explicit: string | undefined;
        if ((ids.get(id) ?? 0) > 1) {
          const n = (used.get(id) ?? 0) + 1;
          used.set(id, n);
          explicit = `${id} ${n}`;
        }
        lines.push(endpointCode(ev, ep, explicit));
      }
    }
  }
  lines.push('', 'app.synth();', '');
  const files = new Map<string, string>();
  files.set('main.ts', lines.join('\n'));
  files.set(
    'cdktf.json',
    JSON.stringify(
      {
        language: 'typescript',
        app: 'node main.ts',
        projectId: `kms-sync-${stack}`,
        sendCrashReports: 'false',
        terraformProviders: [],
        terraformModules: [],
        context: {},
      },
      null,
      2,
    ) + '\n',
  );
  files.set(
    'package.json',
    JSON.stringify(
      {
        name: `kms-${stack}`,
        private: true,
        type: 'module',
        dependencies: {
          'kms-sync': '^0.1.0',
          [flavour]: flavour === 'cdktf' ? '^0.21.0' : '^0.24.0',
          constructs: '>=10.6.0 <10.8.0',
        },
      },
      null,
      2,
    ) + '\n',
  );
  return files;
}
