import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  FileExistsError,
  desiredStateToYaml,
  initConfig,
  loadDesiredState,
  loadDesiredStateFromSources,
  schemaFilePath,
  schemaReferenceFor,
} from '../../src/config/index.js';
import type { DesiredState } from '../../src/model/index.js';
import { withoutSources, writeTree } from './helpers.js';

const root = path.resolve(import.meta.dirname, '../..');

describe('initConfig', () => {
  it('writes a commented starter file that references the schema and loads without errors', async () => {
    const dir = await writeTree({});
    const { file, schema } = await initConfig('config/kms-sync.yaml', { cwd: dir });
    expect(file).toBe(path.join(dir, 'config', 'kms-sync.yaml'));
    const text = await readFile(file, 'utf8');
    expect(text.split('\n')[0]).toBe(`# yaml-language-server: $schema=${schema}`);
    // No kms-sync in this project's node_modules: the reference is a copy beside the file, never a
    // path into this machine's install folder (which no other checkout has).
    expect(schema).toBe('./kms-sync.schema.json');
    expect(await readFile(path.join(dir, 'config', 'kms-sync.schema.json'), 'utf8')).toBe(
      await readFile(schemaFilePath(), 'utf8'),
    );
    expect(text).toMatch(/^# /m);

    const { state } = await loadDesiredState(['config'], { cwd: dir, env: {} });
    expect(state.projects.map((p) => [p.slug, p.name])).toEqual([['my-project', 'My Project']]);
    expect(state.envs[0]).toMatchObject({
      projectEnv: 'my-project-production',
      url: 'https://api.example.com',
      protected: true,
    });
    expect(state.clients[0]?.keys[0]).toMatchObject({ name: 'primary', ttl: '90d', autoRotate: true });
    expect(state.endpoints).toHaveLength(1);
  });

  it("points into the project's node_modules when kms-sync is installed there, and into the checkout inside kms-sync itself", async () => {
    const schemaText = await readFile(schemaFilePath(), 'utf8');
    const dir = await writeTree({
      'node_modules/kms-sync/schemas/kms-sync.schema.json': schemaText,
      'package.json': '{"name":"app"}',
    });
    const { file, schema, schemaCopy } = await initConfig('ops/kms/kms-sync.yaml', { cwd: dir });
    expect(schema).toBe('../../node_modules/kms-sync/schemas/kms-sync.schema.json');
    expect(path.resolve(path.dirname(file), schema)).toBe(
      path.join(dir, 'node_modules/kms-sync/schemas/kms-sync.schema.json'),
    );
    expect(schemaCopy).toBeUndefined();
    expect(schemaReferenceFor(path.join(root, 'examples', 'x.yaml'))).toEqual({
      ref: '../schemas/kms-sync.schema.json',
    });
  });

  it('brings an older schema copy up to date, and never overwrites another file of that name', async () => {
    const dir = await writeTree({
      'a/kms-sync.schema.json': JSON.stringify({
        $id: 'https://kms-sync.dev/schemas/kms-sync.schema.json',
        title: 'old',
      }),
      'b/kms-sync.schema.json': '{"title":"mine"}',
    });
    expect((await initConfig('a/kms.yaml', { cwd: dir })).schemaCopy?.outcome).toBe('updated');
    expect(await readFile(path.join(dir, 'a/kms-sync.schema.json'), 'utf8')).toBe(
      await readFile(schemaFilePath(), 'utf8'),
    );
    await expect(initConfig('b/kms.yaml', { cwd: dir })).rejects.toThrow(
      /b\/kms-sync\.schema\.json exists and is not kms-sync's schema/,
    );
    // Nothing half-written: the configuration that would have pointed at it is not there either.
    await expect(readFile(path.join(dir, 'b/kms.yaml'), 'utf8')).rejects.toThrow(/ENOENT/);
    expect(await readFile(path.join(dir, 'b/kms-sync.schema.json'), 'utf8')).toBe('{"title":"mine"}');
  });

  it('uses the given project slug and name', async () => {
    const dir = await writeTree({});
    await initConfig('kms.yaml', { cwd: dir, project: 'globex', name: 'Globex Inc' });
    const { state } = await loadDesiredState(['kms.yaml'], {
      cwd: dir,
      env: { GLOBEX_URL: 'https://api.globex.example' },
    });
    expect(state.projects[0]).toMatchObject({ slug: 'globex', name: 'Globex Inc' });
    expect(state.envs[0]?.url).toBe('https://api.globex.example');
    await expect(initConfig('other.yaml', { cwd: dir, project: 'Not A Slug' })).rejects.toThrow(
      /invalid project slug "Not A Slug"/,
    );
  });

  it('refuses to overwrite an existing file', async () => {
    const dir = await writeTree({ 'kms.yaml': 'mine\n' });
    const err = await initConfig('kms.yaml', { cwd: dir }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(FileExistsError);
    expect((err as Error).message).toBe(
      'kms.yaml already exists: refusing to overwrite it (choose another file name or remove it first)',
    );
    expect(await readFile(path.join(dir, 'kms.yaml'), 'utf8')).toBe('mine\n');
  });
});

describe('desiredStateToYaml', () => {
  it('round-trips the examples: load(export(state)) equals state', async () => {
    const { state } = await loadDesiredState([path.join('examples', 'acme')], { cwd: root, env: {} });
    const yaml = desiredStateToYaml(state);
    expect(yaml.split('\n')[0]).toBe(
      '# yaml-language-server: $schema=https://kms-sync.dev/schemas/kms-sync.schema.json',
    );
    const back = loadDesiredStateFromSources([{ file: 'export.yaml', text: yaml }], { env: {} });
    expect(withoutSources(back)).toEqual(withoutSources(state));
    // Deterministic, and a fixed point.
    expect(desiredStateToYaml(back)).toBe(yaml);
  });

  it('round-trips awkward values and never interpolates exported text', () => {
    const state: DesiredState = {
      stores: [{ name: 'vault', uri: 'vault://v:8200/kv', default: true, options: { namespace: 'a', retries: 3 } }],
      projects: [
        { slug: 'acme', name: 'Acme: "quoted" # not a comment', description: 'line 1\nline 2\n', protected: true },
        { slug: 'empty', name: 'No environments' },
      ],
      envs: [
        {
          project: 'acme',
          type: 'production',
          projectEnv: 'acme-production',
          url: 'https://api.acme.example',
          protected: true,
        },
      ],
      templates: [{ projectEnv: 'acme-production', name: '123', rateLimitDay: 0, maxClients: 1 }],
      // In canonical order (as the loader and the live reader produce it).
      clients: [
        { projectEnv: 'acme-production', name: 'bare', template: '123', ipWhitelist: [], keys: [] },
        {
          projectEnv: 'acme-production',
          name: 'true',
          type: 'company',
          template: '123',
          ipWhitelist: ['10.0.0.0/8', '2001:db8::/32'],
          metadata: {
            'managed-by': 'kms-sync',
            tpl: '${env:HOME}',
            esc: '$${env:X}',
            n: '42',
            empty: {},
            list: [null, 1.5, 'yes'],
          },
          keys: [
            {
              projectEnv: 'acme-production',
              client: 'true',
              name: 'a',
              expiresAt: '2027-01-01T00:00:00.000Z',
              autoRotate: false,
            },
            {
              projectEnv: 'acme-production',
              client: 'true',
              name: 'b',
              ttl: '1w2d',
              secret: { store: 'vault', name: 'x/${env:Y}' },
              protected: true,
            },
          ],
        },
      ],
      endpoints: [
        { projectEnv: 'acme-production', method: 'DELETE', path: '/v1/{id}' },
        {
          projectEnv: 'acme-production',
          method: 'GET',
          path: '/v1/{id}',
          name: 'Get',
          request: { a: { b: ['c'] } },
          protected: true,
        },
      ],
    };
    const yaml = desiredStateToYaml(state, { schema: '../schemas/kms-sync.schema.json', header: ['exported', ''] });
    expect(
      yaml.startsWith(
        '# yaml-language-server: $schema=../schemas/kms-sync.schema.json\n# exported\n#\napiVersion: kms-sync/v1\n',
      ),
    ).toBe(true);
    expect(yaml).toContain('tpl: $${env:HOME}');
    expect(yaml).toContain('ipWhitelist: [10.0.0.0/8, 2001:db8::/32]');
    const back = loadDesiredStateFromSources([{ file: 'x.yaml', text: yaml }], {
      env: { HOME: '/root', X: 'x', Y: 'y' },
    });
    expect(withoutSources(back)).toEqual(withoutSources(state));
  });

  it('writes an external project as a reference (external: true), and loads it back as one', () => {
    const state: DesiredState = {
      stores: [],
      projects: [],
      externalProjects: [{ slug: 'acme' }],
      envs: [{ project: 'acme', type: 'production', projectEnv: 'acme-production', url: 'https://api.acme.example' }],
      templates: [{ projectEnv: 'acme-production', name: 'gold', rateLimitDay: 10 }],
      clients: [],
      endpoints: [],
    };
    const yaml = desiredStateToYaml(state);
    expect(yaml).toContain('projects:\n  - slug: acme\n    external: true\n    environments:\n');
    const back = loadDesiredStateFromSources([{ file: 'x.yaml', text: yaml }]);
    expect(back.projects).toEqual([]);
    expect(back.externalProjects?.map((p) => p.slug)).toEqual(['acme']);
    expect(withoutSources({ ...back, externalProjects: [] })).toEqual(
      withoutSources({ ...state, externalProjects: [] }),
    );
  });

  it('writes only known fields: nothing secret slips through', () => {
    const state: DesiredState = {
      stores: [],
      projects: [{ slug: 'acme', name: 'Acme' }],
      envs: [{ project: 'acme', type: 'dev', projectEnv: 'acme-dev', url: 'https://dev.example' }],
      templates: [{ projectEnv: 'acme-dev', name: 't', rateLimitDay: 1 }],
      clients: [
        {
          projectEnv: 'acme-dev',
          name: 'c',
          template: 't',
          keys: [{ projectEnv: 'acme-dev', client: 'c', name: 'k', key: 'kmsc_RAWSECRET', id: 'uuid-1' } as never],
        },
      ],
      endpoints: [],
    };
    const yaml = desiredStateToYaml(state);
    expect(yaml).not.toContain('RAWSECRET');
    expect(yaml).not.toContain('uuid-1');
  });

  it('orders output deterministically regardless of input order', () => {
    const a: DesiredState = {
      stores: [],
      projects: [
        { slug: 'b', name: 'B' },
        { slug: 'a', name: 'A' },
      ],
      envs: [
        { project: 'b', type: 'prod', projectEnv: 'b-prod', url: 'https://b' },
        { project: 'a', type: 'stage', projectEnv: 'a-stage', url: 'https://a2' },
        { project: 'a', type: 'prod', projectEnv: 'a-prod', url: 'https://a1' },
      ],
      templates: [],
      clients: [],
      endpoints: [
        { projectEnv: 'a-prod', method: 'POST', path: '/x' },
        { projectEnv: 'a-prod', method: 'GET', path: '/x' },
      ],
    };
    const b: DesiredState = {
      ...a,
      projects: [...a.projects].reverse(),
      envs: [...a.envs].reverse(),
      endpoints: [...a.endpoints].reverse(),
    };
    expect(desiredStateToYaml(a)).toBe(desiredStateToYaml(b));
    const text = desiredStateToYaml(a);
    expect(text.indexOf('slug: a')).toBeLessThan(text.indexOf('slug: b'));
    expect(text.indexOf('type: prod')).toBeLessThan(text.indexOf('type: stage'));
    expect(text.indexOf('method: GET')).toBeLessThan(text.indexOf('method: POST'));
  });
});
