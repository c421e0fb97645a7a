// A whole load of files in the fast YAML subset reads each environment's clients and endpoints a
// chunk at a time after the file's skeleton (config/load.ts buildingFast): the state and its places
// must be the ones a read of the whole tree gives, across chunk boundaries, and a problem met before
// a part of the file outside the fast subset must be reported as the `yaml` package's path reports it.
import { describe, expect, it } from 'vitest';
import { errorsOf, stateOf } from './helpers.js';

const head =
  'apiVersion: kms-sync/v1\nowner: t\nprojects:\n  - slug: p\n    name: p\n    environments:\n' +
  '      - type: dev\n        url: https://api.example.test\n        templates:\n          - name: t\n            rateLimitDay: 1\n';
const client = (i: number, extra = '') =>
  `          - name: c${String(i).padStart(5, '0')}\n            template: t\n            ipWhitelist: [10.0.0.0/8]\n` +
  `            metadata:\n              index: "${i}"\n            keys:\n              - name: k\n${extra}`;

describe('chunked whole load', () => {
  it('places clients after the first chunk at their own line and path', async () => {
    let text = `${head}        clients:\n`;
    for (let i = 0; i < 1200; i++) text += client(i);
    text += '        endpoints:\n          - method: GET\n            path: /x\n';
    const { state } = await stateOf({ 'a.yaml': text });
    expect(state.clients).toHaveLength(1200);
    const lines = text.split('\n');
    for (const i of [0, 499, 500, 1100, 1199]) {
      const c = state.clients[i]!;
      expect(c.name).toBe(`c${String(i).padStart(5, '0')}`);
      expect(c.source!.path).toBe(`projects[0].environments[0].clients[${i}]`);
      expect(lines[c.source!.line - 1]).toContain(`- name: ${c.name}`);
      expect(c.keys[0]!.source!.path).toBe(`projects[0].environments[0].clients[${i}].keys[0]`);
    }
    expect(state.endpoints[0]!.source!.path).toBe('projects[0].environments[0].endpoints[0]');
  });

  it('reports a problem met before a part outside the fast subset as the yaml package path does', async () => {
    // A key defined twice in the second client, an anchor (outside the fast subset) in the 551st.
    let late = `${head}        clients:\n`;
    for (let i = 0; i < 600; i++) {
      const extra = i === 1 ? '              - name: k\n' : '';
      late += client(i, extra).replace(i === 550 ? 'template: t' : '\0', 'template: &tpl t');
    }
    // The same problem, with the anchor in the skeleton instead: loaded by the yaml package from the start.
    const early = late.replace('template: &tpl t', 'template: t').replace('owner: t', 'owner: &o t');
    const expected = await errorsOf({ 'a.yaml': early });
    expect(expected).toEqual([expect.stringMatching(/^a\.yaml:\d+:\d+: .*clients\[1\]\.keys\[1\].*defined twice/)]);
    expect(await errorsOf({ 'a.yaml': late })).toEqual(expected);
  });

  it('gives the clients of one configured range one frozen list, and still places each bad range', async () => {
    let text = `${head}        clients:\n`;
    for (let i = 0; i < 3; i++) text += client(i);
    text += client(3).replace('[10.0.0.0/8]', '[10.0.0.0/08]');
    text += client(4).replace('[10.0.0.0/8]', '[10.0.0.300]') + client(5).replace('[10.0.0.0/8]', '[10.0.0.300]');
    const { state } = await stateOf({ 'a.yaml': text.replace(/\n.*10\.0\.0\.300.*\n/g, '\n') });
    const [c0, c1, c2, c3] = state.clients;
    expect(c0!.ipWhitelist).toEqual(['10.0.0.0/8']);
    expect(c1!.ipWhitelist).toBe(c0!.ipWhitelist);
    expect(c2!.ipWhitelist).toBe(c0!.ipWhitelist);
    expect(() => (c0!.ipWhitelist as string[]).push('10.1.0.0/16')).toThrow();
    // Another spelling of the range is a list of its own, with the same canonical value.
    expect(c3!.ipWhitelist).toEqual(['10.0.0.0/8']);
    expect(c3!.ipWhitelist).not.toBe(c0!.ipWhitelist);
    const bad = /^a\.yaml:(\d+):\d+: projects\[0\]\.environments\[0\]\.clients\[(\d)\]\.ipWhitelist\[0\]: invalid IP/;
    const errors = await errorsOf({ 'a.yaml': text });
    expect(errors).toEqual([expect.stringMatching(bad), expect.stringMatching(bad)]);
    const lines = text.split('\n');
    expect(errors.map((e) => bad.exec(e)![2])).toEqual(['4', '5']);
    for (const e of errors) expect(lines[Number(bad.exec(e)![1]) - 1]).toContain('10.0.0.300');
  });
});
