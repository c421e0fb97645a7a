// Name rules of the remote backends: deterministic, backend-legal and collision-free, on tricky
// hand-picked inputs and on an exhaustive-ish set of short names over a hostile alphabet.
import { describe, expect, it } from 'vitest';
import { GITHUB_NAME_MAX, GITHUB_RESERVED_PREFIXES } from '../../../src/secrets/backends/github.js';
import { GITLAB_NAME_MAX, GITLAB_RESERVED_PREFIXES } from '../../../src/secrets/backends/gitlab.js';
import {
  dataKeyName,
  dnsSubdomainName,
  envStyleName,
  isLegalDataKey,
  shortHash,
  vaultPathName,
} from '../../../src/secrets/backends/names.js';
import { SecretStoreError } from '../../../src/secrets/store.js';

interface Mapping {
  label: string;
  map(logical: string): string;
  legal(name: string): boolean;
}

const github = (prefix = ''): Mapping => ({
  label: `github${prefix ? ` prefix ${prefix}` : ''}`,
  map: (l) => envStyleName(l, { reservedPrefixes: GITHUB_RESERVED_PREFIXES, prefix, maxLength: GITHUB_NAME_MAX }),
  legal: (n) => /^[A-Z_][A-Z0-9_]*$/.test(n) && !n.startsWith('GITHUB_') && n.length <= GITHUB_NAME_MAX,
});
const gitlab: Mapping = {
  label: 'gitlab',
  map: (l) => envStyleName(l, { reservedPrefixes: GITLAB_RESERVED_PREFIXES, maxLength: GITLAB_NAME_MAX }),
  legal: (n) => /^[A-Za-z_][A-Za-z0-9_]{0,254}$/.test(n) && !/^(CI_|GITLAB_)/.test(n),
};
const k8sSecret = (prefix = ''): Mapping => ({
  label: `kubernetes Secret name${prefix ? ` prefix ${prefix}` : ''}`,
  map: (l) => dnsSubdomainName(l, prefix),
  legal: (n) => n.length <= 253 && /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(n),
});
const k8sDataKey: Mapping = { label: 'kubernetes data key', map: dataKeyName, legal: isLegalDataKey };
const vault: Mapping = {
  label: 'vault path',
  map: vaultPathName,
  legal: (n) => n.split('/').every((s) => /^[A-Za-z0-9._%-]+$/.test(s) && !/^\.+$/.test(s)),
};
const MAPPINGS = [github(), github('KMS_'), gitlab, k8sSecret(), k8sSecret('kms-'), k8sDataKey, vault];

const TRICKY = [
  'a-b/c/k',
  'a/b-c/k',
  'a_b/c/k',
  'a/b_c/k',
  'a.b/c/k',
  'a/b.c/k',
  'A-b/c/k',
  'a-B/c/k',
  'a--b/c/k',
  'a-/b/k',
  '-a/b/k',
  'a/b/c/k',
  'a/b/ck',
  'ab/c/k',
  'a b/c/k',
  'a%20b/c/k',
  'a%2Fb/c/k',
  'é/c/k',
  'e/c/k',
  'E/c/k',
  '__/c/k',
  '..//',
  '../c/k',
  './c/k',
  'github/actions/token',
  'GITHUB_TOKEN/x/y',
  'ci/job/token',
  '9lives/c/k',
  'k-9lives/c/k',
  'acme-production/globex/primary',
  'acme-production/globex/primary___abcdefgh',
  'acme-production/globex/primary--abcdefgh',
  'acme-production/globex/primary..abcdefgh',
  'x/' + 'y'.repeat(300) + '/k',
  'x/' + 'y'.repeat(300) + '/l',
  'x/' + 'Y'.repeat(300) + '/k',
  'single',
  'two/parts',
];

function expectInjective(m: Mapping, inputs: string[]): void {
  const seen = new Map<string, string>();
  for (const l of inputs) {
    let n: string;
    try {
      n = m.map(l);
    } catch (e) {
      // Only structurally invalid logical names (empty segments) may be refused.
      expect(e).toBeInstanceOf(SecretStoreError);
      expect(l.split('/').some((s) => s === '')).toBe(true);
      continue;
    }
    expect(m.legal(n), `${m.label}: '${l}' → '${n}' is not legal`).toBe(true);
    expect(m.map(l), `${m.label}: not deterministic for '${l}'`).toBe(n);
    const prev = seen.get(n);
    expect(prev === undefined || prev === l, `${m.label}: '${prev}' and '${l}' both map to '${n}'`).toBe(true);
    seen.set(n, l);
  }
}

describe('backend name mappings', () => {
  for (const m of MAPPINGS) {
    it(`${m.label}: legal, deterministic, collision-free on tricky names`, () => {
      expectInjective(m, TRICKY);
    });
  }

  it('collision-free on every short name over a hostile alphabet (all mappings)', () => {
    const alphabet = ['a', 'B', '-', '_', '.', ' ', 'é', '1'];
    const segs: string[] = [];
    for (const x of alphabet) {
      segs.push(x);
      for (const y of alphabet) segs.push(x + y);
    }
    const inputs: string[] = [];
    for (const s of segs) for (const t of ['c', 'c-d', 'C_d', 'c.d']) inputs.push(`${s}/${t}/k`, `${s}-${t}/k/z`);
    for (const m of MAPPINGS) expectInjective(m, inputs);
  });

  it('readable where the input allows it, marked and hashed where it does not', () => {
    expect(github().map('acme-production/globex/primary')).toBe('ACME_PRODUCTION__GLOBEX__PRIMARY');
    expect(github().map('a-b/c/k')).toBe('A_B__C__K');
    expect(github().map('a/b-c/k')).toBe('A__B_C__K');
    expect(github().map('a_b/c/k')).toBe(`A_B__C__K___${shortHash('a_b/c/k').toUpperCase()}`);
    expect(k8sSecret().map('acme-prod/web/primary')).toBe('acme-prod.web.primary');
    expect(k8sDataKey.map('acme-prod/web_app/primary')).toBe('acme-prod.web_app.primary');
    expect(vault.map('acme-prod/web/primary')).toBe('acme-prod/web/primary');
    expect(vault.map('100%/ok/..')).toBe('100%25/ok/%2E%2E');
    expect(shortHash('x')).toMatch(/^[a-z2-7]{8}$/);
    expect(github().map('x/' + 'y'.repeat(300) + '/k').length).toBeLessThanOrEqual(GITHUB_NAME_MAX);
  });

  it('refuses empty names and empty segments', () => {
    for (const m of MAPPINGS) {
      for (const bad of ['', 'a//b', '/a', 'a/']) expect(() => m.map(bad)).toThrow(SecretStoreError);
    }
  });
});
