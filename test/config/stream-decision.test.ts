// loadDesiredStateStreamed declines (undefined: the caller loads whole) a configuration where at
// most one environment holds clients or endpoints. A glance at the text (the words `clients` and
// `endpoints`) says so before the skeleton read for the usual one-environment layout; it must
// never decline a configuration whose clients or endpoints sit in two environments.
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { loadDesiredStateStreamed } from '../../src/config/load.js';
import { scratchDir } from '../support/scratch.js';

const head = 'apiVersion: kms-sync/v1\nowner: t\nprojects:\n  - slug: p\n    name: p\n    environments:\n';
const clients = (pad: string) => `${pad}clients:\n${pad}  - name: c\n${pad}    template: t\n`;
const endpoints = (pad: string) => `${pad}endpoints:\n${pad}  - method: GET\n${pad}    path: /x\n`;
const env = (type: string, body: string) =>
  `      - type: ${type}\n        url: https://api.example.test\n        templates:\n          - name: t\n            rateLimitDay: 1\n${body}`;

async function streams(files: Record<string, string>): Promise<boolean> {
  const dir = scratchDir();
  for (const [name, text] of Object.entries(files)) writeFileSync(path.join(dir, name), text);
  const load = await loadDesiredStateStreamed(Object.keys(files), { cwd: dir, env: {} });
  return load !== undefined;
}

describe('streamed load: one environment or more', () => {
  it('declines one environment with clients and endpoints, in either order, with comments and CRLF', async () => {
    const pad = '        ';
    expect(await streams({ 'a.yaml': head + env('dev', clients(pad) + endpoints(pad)) })).toBe(false);
    expect(await streams({ 'a.yaml': head + env('dev', endpoints(pad) + '# note\n\n' + clients(pad)) })).toBe(false);
    const crlf = (head + env('dev', clients(pad) + endpoints(pad))).replaceAll('\n', '\r\n');
    expect(await streams({ 'a.yaml': crlf })).toBe(false);
  });

  it('streams clients in one environment and endpoints in another, in one file or two', async () => {
    const pad = '        ';
    const two = head + env('dev', clients(pad)) + env('prod', endpoints(pad));
    expect(await streams({ 'a.yaml': two })).toBe(true);
    const reversed = head + env('dev', endpoints(pad)) + env('prod', clients(pad));
    expect(await streams({ 'a.yaml': reversed })).toBe(true);
    const other = head.replace('slug: p', 'slug: q').replace('name: p', 'name: q');
    expect(
      await streams({ 'a.yaml': head + env('dev', clients(pad)), 'b.yaml': other + env('dev', endpoints(pad)) }),
    ).toBe(true);
  });

  it('streams environments written compactly (the body key on the item line)', async () => {
    const compact = (type: string, body: string) =>
      `      - ${body.trimStart()}        type: ${type}\n        url: https://api.example.test\n        templates:\n          - name: t\n            rateLimitDay: 1\n`;
    const pad = '        ';
    const text = head + compact('dev', clients(pad)) + compact('prod', endpoints(pad));
    expect(await streams({ 'a.yaml': text })).toBe(true);
  });
});
