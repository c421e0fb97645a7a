// The build's generated validator (ajv standalone code of schemas/kms-sync.schema.json, loaded by
// src/config/schema.ts instead of compiling the schema at every start) finds exactly the errors,
// with the same fields, that the schema compiled at run time finds; it names the schema it was made
// from, so an edited schema is never checked by a stale validator.
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import type { ValidateFunction } from 'ajv';
import { createAjv, loadSchema, schemaDigest, standaloneValidatorSource } from '../../src/config/schema.js';
import { xorshift32 } from '../support/xorshift.js';

const requireHere = createRequire(import.meta.url);

function loadGenerated(source: string): ValidateFunction & { schemaSha256?: string } {
  const module = { exports: {} as ValidateFunction & { schemaSha256?: string } };
  new Function('require', 'module', 'exports', source)(requireHere, module, module.exports);
  return module.exports;
}

const client = (over: Record<string, unknown> = {}) => ({
  name: 'web',
  template: 'gold',
  keys: [{ name: 'primary', ttl: '90d' }],
  ...over,
});
const doc = (
  env: Record<string, unknown> = {},
  project: Record<string, unknown> = {},
  top: Record<string, unknown> = {},
) => ({
  apiVersion: 'kms-sync/v1',
  projects: [
    {
      slug: 'acme',
      name: 'Acme',
      environments: [
        {
          type: 'production',
          url: 'https://api.example.com',
          templates: [{ name: 'gold', rateLimitDay: 1000 }],
          clients: [client()],
          ...env,
        },
      ],
      ...project,
    },
  ],
  ...top,
});

const DOCS: unknown[] = [
  doc(),
  doc({ url: 'not a url' }),
  doc({
    clients: [
      client({ ipWhitelist: ['10.0.0.0/8', 7] }),
      client({ keys: [{ name: 'k', ttl: '5x', secret: { stor: 'default' } }] }),
    ],
  }),
  doc({
    endpoints: [
      { method: 'FETCH', path: '/x' },
      { method: 'GET', path: 'no-slash', request: 'text' },
    ],
  }),
  doc({}, { slug: 'Bad_Slug', colour: 'red' }),
  doc({ templates: [{ name: 'gold', rateLimitDay: -5, maxClients: 1.5 }] }),
  doc({}, {}, { apiVersion: 'v2', stores: [{ name: 'vault', uri: 42, default: 'yes' }], extra: true }),
  { projects: 'none' },
  [],
  'text',
  null,
];

describe('generated schema validator', () => {
  const generated = loadGenerated(standaloneValidatorSource());
  const compiled = createAjv({ validateSchema: false }).compile(loadSchema());

  it('names the schema it was made from', () => {
    expect(generated.schemaSha256).toBe(schemaDigest());
  });

  // The generated `uri` check answers plain http(s) URLs without ajv-formats' expression: the same verdict on
  // URLs in and around that shape, and on random strings of their characters (fails with a quick answer too wide).
  it('the same verdict on environment URLs as the schema compiled at run time', () => {
    const urls = [
      'https://api.example.com',
      'HTTP://API.EXAMPLE.COM:8080/v1/',
      'https://a',
      'https://a:/p',
      'https://a:80x',
      'https://user@a/p',
      'https://a/p?q=1#f',
      'https://a/%41',
      'https://a b',
      'https://[::1]:8/x',
      'https://',
      'https:/a',
      'https:a',
      'ftp://a/b',
      'http://a//b',
      'https://a/p\n',
      '',
    ];
    const draw = xorshift32(37);
    const next = () => draw(2 ** 32);
    const alphabet = 'hHtps:/.a0-_~%@?#[] 9Z';
    for (let i = 0; i < 3000; i++) {
      let u = i % 2 ? 'https://' : '';
      for (let n = next() % 14; n > 0; n--) u += alphabet[next() % alphabet.length];
      urls.push(u);
    }
    let accepted = 0;
    for (const url of urls) {
      const d = doc({ url });
      const ok = compiled(d);
      expect(generated(d), url).toBe(ok);
      expect(generated.errors ?? null).toEqual(compiled.errors ?? null);
      if (ok) accepted++;
    }
    expect(accepted).toBeGreaterThan(100);
    expect(accepted).toBeLessThan(urls.length - 100);
  });

  it.each(DOCS.map((d, i) => [i, d] as const))(
    'document %i: the same verdict and the same errors as the schema compiled at run time',
    (_, d) => {
      const ok = compiled(d);
      expect(generated(d)).toBe(ok);
      expect(generated.errors ?? null).toEqual(compiled.errors ?? null);
      if (d === DOCS[0]) expect(ok).toBe(true);
      if (d !== DOCS[0]) expect(ok).toBe(false);
    },
  );
});
