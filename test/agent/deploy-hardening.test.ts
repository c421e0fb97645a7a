// Issue 35 item 8: the agent's deployment files, hardened. The systemd unit rates at or below 3.0
// in `systemd-analyze security` (run offline on the file where systemd-analyze exists; it skips
// loudly elsewhere) and takes its secrets as credentials; the Dockerfile's base image is pinned by
// digest and `.dockerignore` keeps git, local stores, environment files and core dumps out of the
// build context; the Kubernetes example pins its image by digest, takes its credentials from a
// secret manager (no stringData), does not chown the volume on every start, and has a NetworkPolicy
// selecting the agent's pods; docs/agent.md tells how to pin ssh host keys (known_hosts).
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { repoRoot } from '../support/cli.js';
import { skipWhen } from '../support/skip.js';

const dir = path.join(repoRoot, 'examples', 'agent');
const UNIT = path.join(dir, 'kms-sync-agent.service');
const systemdAnalyze = (() => {
  try {
    return execFileSync('sh', ['-c', 'command -v systemd-analyze'], { encoding: 'utf8' }).trim() || undefined;
  } catch {
    return undefined;
  }
})();

describe("the agent's deployment files are hardened", () => {
  it.skipIf(
    skipWhen(
      !systemdAnalyze,
      "deploy-hardening: systemd-analyze is not installed, so the unit's exposure cannot be rated",
    ),
  )('kms-sync-agent.service: systemd-analyze security rates it at or below 3.0', () => {
    let out: string;
    try {
      out = execFileSync(systemdAnalyze!, ['security', '--offline=true', '--no-pager', UNIT], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      });
    } catch (e) {
      // systemd-analyze exits non-zero when the rating is over its --threshold (100 by default); the text is still the rating.
      out = String((e as { stdout?: string }).stdout ?? '');
    }
    const score = Number(/Overall exposure level for kms-sync-agent\.service: (\d+(?:\.\d+)?)/.exec(out)?.[1]);
    expect(score, out.slice(-3000)).toBeLessThanOrEqual(3.0);
  });

  it('kms-sync-agent.service: secrets as credentials (no environment file of secrets), a private umask, no core dumps', () => {
    const text = readFileSync(UNIT, 'utf8');
    const set = (key: string) =>
      text
        .split('\n')
        .filter((l) => l.startsWith(`${key}=`))
        .map((l) => l.slice(key.length + 1));
    expect(set('LoadCredential')).toContain('KMS_API_KEY:/etc/kms-sync/credentials/KMS_API_KEY');
    expect(set('UMask')).toEqual(['0077']);
    expect(set('LimitCORE')).toEqual(['0']);
    expect(set('CapabilityBoundingSet')).toEqual(['']);
    expect(set('ProtectProc')).toEqual(['invisible']);
    expect(set('RestrictAddressFamilies')).toEqual(['AF_UNIX AF_INET AF_INET6']);
    expect(set('SystemCallFilter')).toContain('@system-service');
    expect(text).not.toMatch(/^Environment=.*(KEY|TOKEN|SECRET)=/m);
  });

  it("Dockerfile: every stage's base image is pinned by digest", () => {
    const text = readFileSync(path.join(dir, 'Dockerfile'), 'utf8');
    const args = Object.fromEntries([...text.matchAll(/^ARG\s+(\w+)=(\S+)$/gm)].map((m) => [m[1]!, m[2]!]));
    const froms = [...text.matchAll(/^FROM\s+(\S+)/gm)].map((m) =>
      m[1]!.replace(/^\$\{(\w+)\}$/, (_, name: string) => args[name] ?? ''),
    );
    expect(froms.length).toBeGreaterThanOrEqual(2);
    for (const image of froms) expect(image).toMatch(/^[\w./:-]+@sha256:[0-9a-f]{64}$/);
  });

  it('.dockerignore keeps git, local stores, environment files and core dumps out of the build context', () => {
    const lines = readFileSync(path.join(repoRoot, '.dockerignore'), 'utf8')
      .split('\n')
      .map((l) => l.trim())
      .filter((l) => l && !l.startsWith('#'));
    for (const must of [
      '.git',
      '**/.kms-sync',
      '**/.env',
      '**/.env.*',
      '**/*.sops.yaml',
      '**/core',
      'node_modules',
      'dist',
    ])
      expect(lines).toContain(must);
  });

  it('kubernetes.yaml: image by digest, credentials from a secret manager, no recursive chown, a NetworkPolicy for the agent', () => {
    const docs = parseAllDocuments(readFileSync(path.join(dir, 'kubernetes.yaml'), 'utf8')).map((d) => d.toJS() as any);
    expect(docs.filter((d) => d.kind === 'Secret')).toEqual([]);
    expect(JSON.stringify(docs)).not.toContain('stringData');
    const dep = docs.find((d) => d.kind === 'Deployment');
    const pod = dep.spec.template;
    expect(pod.spec.containers[0].image).toMatch(/@sha256:[0-9a-f]{64}$/);
    expect(pod.spec.securityContext.fsGroupChangePolicy).toBe('OnRootMismatch');
    const policy = docs.find((d) => d.kind === 'NetworkPolicy');
    for (const [k, v] of Object.entries(policy.spec.podSelector.matchLabels)) expect(pod.metadata.labels[k]).toBe(v);
    expect(policy.spec.policyTypes).toEqual(['Ingress', 'Egress']);
    expect(policy.spec.ingress.flatMap((r: any) => r.ports.map((p: any) => p.port))).toEqual(['http']);
    const secret = docs.find((d) => d.kind === 'ExternalSecret');
    expect(secret.spec.target.name).toBe(pod.spec.containers[0].envFrom[0].secretRef.name);
  });

  it('docs/agent.md: how to pin the ssh host key of the repository (known_hosts)', () => {
    const text = readFileSync(path.join(repoRoot, 'docs', 'agent.md'), 'utf8');
    expect(text).toContain('known_hosts');
    expect(text).toContain('StrictHostKeyChecking=yes');
    expect(text).toContain('LoadCredential=');
  });
});
