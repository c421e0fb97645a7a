// The agent's deployment files (examples/agent/), checked offline. Kubernetes' own JSON schemas
// cannot be downloaded here, so this is a structural check written for the fields that matter,
// with ajv: the kinds and API versions, a Deployment whose probes hit /healthz and /readyz on a
// declared port, non-root with a read-only root filesystem, the state folder on a persistent
// volume, credentials from the Secret; a Service selecting the pods through a named port; and
// cross-references (selector ↔ labels, secret and claim names). Every flag the files pass to
// `kms-sync agent` is one it has; the Dockerfile runs as a non-root user with the state dir a volume.
import { execFileSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { Ajv } from 'ajv';
import { describe, expect, it } from 'vitest';
import { parseAllDocuments } from 'yaml';
import { buildFullProgram } from '../../src/cli/commands.js';
import { repoRoot } from '../crash/lib.js';
import { scratchDir } from '../support/scratch.js';
import { skipWhen } from '../support/skip.js';

const dir = path.join(repoRoot, 'examples', 'agent');
const STATE_DIR = '/var/lib/kms-sync';
const str = { type: 'string', minLength: 1 };
const labels = { type: 'object', minProperties: 1, additionalProperties: { type: 'string' } };
const meta = { type: 'object', required: ['name', 'labels'], properties: { name: str, labels } };
const probe = (p: string) => ({
  type: 'object',
  required: ['httpGet'],
  properties: {
    httpGet: {
      type: 'object',
      required: ['path', 'port'],
      properties: { path: { const: p }, port: { type: ['string', 'integer'] } },
    },
  },
});

const SCHEMAS: Record<string, object> = {
  // The credentials come from a secret manager (External Secrets Operator), never a committed stringData.
  ExternalSecret: {
    type: 'object',
    required: ['apiVersion', 'kind', 'metadata', 'spec'],
    properties: {
      apiVersion: { const: 'external-secrets.io/v1' },
      metadata: meta,
      spec: {
        type: 'object',
        required: ['secretStoreRef', 'target', 'data'],
        properties: {
          secretStoreRef: { type: 'object', required: ['kind', 'name'] },
          target: { type: 'object', required: ['name'] },
          data: {
            type: 'array',
            allOf: [
              { contains: { properties: { secretKey: { const: 'KMS_API_KEY' } } } },
              { contains: { properties: { secretKey: { const: 'KMS_API_URL' } } } },
            ],
            items: {
              type: 'object',
              required: ['secretKey', 'remoteRef'],
              properties: { remoteRef: { type: 'object', required: ['key'] } },
            },
          },
        },
      },
    },
  },
  NetworkPolicy: {
    type: 'object',
    required: ['apiVersion', 'metadata', 'spec'],
    properties: {
      apiVersion: { const: 'networking.k8s.io/v1' },
      metadata: meta,
      spec: {
        type: 'object',
        required: ['podSelector', 'policyTypes', 'ingress', 'egress'],
        properties: {
          podSelector: { type: 'object', required: ['matchLabels'] },
          policyTypes: { const: ['Ingress', 'Egress'] },
        },
      },
    },
  },
  PersistentVolumeClaim: {
    type: 'object',
    required: ['apiVersion', 'metadata', 'spec'],
    properties: {
      apiVersion: { const: 'v1' },
      metadata: meta,
      spec: {
        type: 'object',
        required: ['accessModes', 'resources'],
        properties: { accessModes: { type: 'array', contains: { const: 'ReadWriteOnce' } } },
      },
    },
  },
  Deployment: {
    type: 'object',
    required: ['apiVersion', 'metadata', 'spec'],
    properties: {
      apiVersion: { const: 'apps/v1' },
      metadata: meta,
      spec: {
        type: 'object',
        required: ['replicas', 'selector', 'template', 'strategy'],
        properties: {
          replicas: { const: 1 },
          strategy: { type: 'object', required: ['type'], properties: { type: { const: 'Recreate' } } },
          selector: { type: 'object', required: ['matchLabels'], properties: { matchLabels: labels } },
          template: {
            type: 'object',
            required: ['metadata', 'spec'],
            properties: {
              metadata: { type: 'object', required: ['labels'], properties: { labels } },
              spec: {
                type: 'object',
                required: ['containers', 'volumes', 'securityContext', 'terminationGracePeriodSeconds'],
                properties: {
                  terminationGracePeriodSeconds: { type: 'integer', minimum: 10 },
                  securityContext: {
                    type: 'object',
                    required: ['runAsNonRoot', 'runAsUser'],
                    properties: { runAsNonRoot: { const: true }, runAsUser: { type: 'integer', minimum: 1 } },
                  },
                  containers: {
                    type: 'array',
                    minItems: 1,
                    maxItems: 1,
                    items: {
                      type: 'object',
                      required: [
                        'name',
                        'image',
                        'args',
                        'ports',
                        'livenessProbe',
                        'readinessProbe',
                        'securityContext',
                        'volumeMounts',
                        'envFrom',
                      ],
                      properties: {
                        image: str,
                        args: { type: 'array', items: { type: 'string', pattern: '^--' } },
                        ports: {
                          type: 'array',
                          minItems: 1,
                          items: {
                            type: 'object',
                            required: ['name', 'containerPort'],
                            properties: { name: str, containerPort: { type: 'integer', minimum: 1, maximum: 65535 } },
                          },
                        },
                        livenessProbe: probe('/healthz'),
                        readinessProbe: probe('/readyz'),
                        securityContext: {
                          type: 'object',
                          required: ['readOnlyRootFilesystem', 'allowPrivilegeEscalation'],
                          properties: {
                            readOnlyRootFilesystem: { const: true },
                            allowPrivilegeEscalation: { const: false },
                          },
                        },
                        volumeMounts: { type: 'array', items: { type: 'object', required: ['name', 'mountPath'] } },
                        envFrom: { type: 'array', minItems: 1, items: { type: 'object', required: ['secretRef'] } },
                        env: {
                          type: 'array',
                          items: {
                            type: 'object',
                            required: ['name'],
                            not: { required: ['value'], properties: { name: { pattern: 'KEY|TOKEN|SECRET' } } },
                          },
                        },
                      },
                    },
                  },
                  volumes: { type: 'array', minItems: 1, items: { type: 'object', required: ['name'] } },
                },
              },
            },
          },
        },
      },
    },
  },
  Service: {
    type: 'object',
    required: ['apiVersion', 'metadata', 'spec'],
    properties: {
      apiVersion: { const: 'v1' },
      metadata: meta,
      spec: {
        type: 'object',
        required: ['selector', 'ports'],
        properties: {
          selector: labels,
          ports: { type: 'array', minItems: 1, items: { type: 'object', required: ['name', 'port', 'targetPort'] } },
        },
      },
    },
  },
  ServiceMonitor: {
    type: 'object',
    required: ['apiVersion', 'metadata', 'spec'],
    properties: {
      apiVersion: { const: 'monitoring.coreos.com/v1' },
      metadata: meta,
      spec: {
        type: 'object',
        required: ['selector', 'endpoints'],
        properties: {
          endpoints: {
            type: 'array',
            minItems: 1,
            items: { type: 'object', required: ['port', 'path'], properties: { path: { const: '/metrics' } } },
          },
        },
      },
    },
  },
};

/** The long options of `kms-sync agent`. */
async function agentFlags(): Promise<Set<string>> {
  const program = await buildFullProgram();
  const agent = program.commands.find((c) => c.name() === 'agent')!;
  return new Set(agent.options.map((o) => o.long!));
}
const flagsIn = (args: string[]) => args.filter((a) => a.startsWith('--')).map((a) => a.split('=')[0]!);

describe('examples/agent', () => {
  const docs = parseAllDocuments(readFileSync(path.join(dir, 'kubernetes.yaml'), 'utf8')).map((d) => d.toJS() as any);
  const byKind = (kind: string) => docs.find((d) => d.kind === kind);

  it('kubernetes.yaml: every document passes the structural check of its kind', () => {
    const ajv = new Ajv({ allErrors: true, strict: false });
    expect(docs.map((d) => d.kind).sort()).toEqual([
      'Deployment',
      'ExternalSecret',
      'NetworkPolicy',
      'PersistentVolumeClaim',
      'Service',
      'ServiceMonitor',
    ]);
    for (const d of docs) {
      const validate = ajv.compile(SCHEMAS[d.kind]!);
      expect(validate(d) ? [] : validate.errors, d.kind).toEqual([]);
    }
  });

  it('kubernetes.yaml: the documents refer to each other correctly', async () => {
    const dep = byKind('Deployment');
    const pod = dep.spec.template;
    const c = pod.spec.containers[0];
    // The selector picks the pods; the Service and the ServiceMonitor find them.
    for (const [k, v] of Object.entries(dep.spec.selector.matchLabels)) expect(pod.metadata.labels[k]).toBe(v);
    for (const [k, v] of Object.entries(byKind('Service').spec.selector)) expect(pod.metadata.labels[k]).toBe(v);
    for (const [k, v] of Object.entries(byKind('ServiceMonitor').spec.selector.matchLabels))
      expect(byKind('Service').metadata.labels[k]).toBe(v);
    // kube-prometheus-stack's Prometheus picks ServiceMonitors by the `release` label.
    expect(byKind('ServiceMonitor').metadata.labels.release).toBe('kube-prometheus-stack');
    // Probes and the Service target a port the container declares; the ServiceMonitor a port the Service names.
    const ports = new Set(c.ports.flatMap((p: any) => [p.name, p.containerPort]));
    expect(ports.has(c.livenessProbe.httpGet.port)).toBe(true);
    expect(ports.has(c.readinessProbe.httpGet.port)).toBe(true);
    for (const p of byKind('Service').spec.ports) expect(ports.has(p.targetPort)).toBe(true);
    expect(byKind('Service').spec.ports.map((p: any) => p.name)).toContain(
      byKind('ServiceMonitor').spec.endpoints[0].port,
    );
    // The state folder (the image's --state-dir) is mounted from the claim; /tmp is writable.
    const mount = c.volumeMounts.find((m: any) => m.mountPath === STATE_DIR);
    const volume = pod.spec.volumes.find((v: any) => v.name === mount?.name);
    expect(volume?.persistentVolumeClaim?.claimName).toBe(byKind('PersistentVolumeClaim').metadata.name);
    expect(c.volumeMounts.some((m: any) => m.mountPath === '/tmp')).toBe(true);
    // Credentials come from the Secret, never as plain values in the Deployment.
    expect(c.envFrom[0].secretRef.name).toBe(byKind('ExternalSecret').spec.target.name);
    expect(JSON.stringify(dep)).not.toMatch(/sk_(live|test)_/);
    // The UI token the args read is one the Secret provides.
    const tokenArg = c.args.find((a: string) => a.startsWith('--ui-token='));
    expect(byKind('ExternalSecret').spec.data.map((d: any) => d.secretKey)).toContain(tokenArg.split('env:')[1]);
    // Every flag is one `kms-sync agent` has.
    const known = await agentFlags();
    expect(flagsIn(c.args).filter((f) => !known.has(f))).toEqual([]);
  });

  it('Dockerfile: a non-root user under tini, the state folder a volume, the same flags', async () => {
    const text = readFileSync(path.join(dir, 'Dockerfile'), 'utf8');
    const user = /^USER\s+(\S+)/m.exec(text)?.[1];
    expect(user).toBeDefined();
    expect(user).not.toMatch(/^(root|0)(:|$)/);
    expect(/^VOLUME\s+\[?"?([^"\]\s]+)/m.exec(text)?.[1]).toBe(STATE_DIR);
    const entry = JSON.parse(/^ENTRYPOINT\s+(\[.*\])$/m.exec(text)![1]!) as string[];
    // Under an init (tini, installed from Debian): it reaps what a killed reconcile orphans and forwards SIGTERM.
    expect(entry.slice(0, 5)).toEqual(['/usr/bin/tini', '--', 'node', '/app/dist/bin/kms-sync.js', 'agent']);
    expect(text).toMatch(/apt-get install[^\n]*\btini\b/);
    expect(entry[entry.indexOf('--state-dir') + 1]).toBe(STATE_DIR);
    const known = await agentFlags();
    expect(flagsIn(entry.slice(entry.indexOf('agent'))).filter((f) => !known.has(f))).toEqual([]);
    expect(text).not.toMatch(/^ENV\s.*(KMS_API_KEY|TOKEN|SECRET)/m);
  });

  it('kms-sync-agent.service: systemd keeps the state, stops with SIGTERM, and passes known flags', async () => {
    const text = readFileSync(path.join(dir, 'kms-sync-agent.service'), 'utf8');
    expect(text).toMatch(/^StateDirectory=kms-sync$/m);
    expect(text).toMatch(/^KillSignal=SIGTERM$/m);
    const exec = /^ExecStart=(.*)$/m.exec(text)![1]!.split(/\s+/);
    expect(exec[exec.indexOf('--state-dir') + 1]).toBe(STATE_DIR);
    const known = await agentFlags();
    expect(flagsIn(exec).filter((f) => !known.has(f))).toEqual([]);
  });

  const analyze = '/usr/bin/systemd-analyze';
  it.skipIf(
    skipWhen(
      !existsSync(analyze) || !existsSync('/usr/lib/systemd/system/sysinit.target'),
      "systemd-analyze (and the system units) are not installed: the unit's ExecStart is not verified",
    ),
  )(
    'kms-sync-agent.service: systemd-analyze verify finds its ExecStart where `npm install -g kms-sync` puts it (/usr/local/bin), and nowhere else',
    () => {
      // A root with the system's units, the unit, and kms-sync where npm's global prefix (/usr/local
      // for a Node installed under /usr) puts its bin: verify must pass; without that file it must fail.
      const root = scratchDir('kms-sync-unit-');
      mkdirSync(path.join(root, 'usr/lib/systemd'), { recursive: true });
      cpSync('/usr/lib/systemd/system', path.join(root, 'usr/lib/systemd/system'), { recursive: true });
      mkdirSync(path.join(root, 'etc/systemd/system'), { recursive: true });
      cpSync(path.join(dir, 'kms-sync-agent.service'), path.join(root, 'etc/systemd/system/kms-sync-agent.service'));
      const verify = () => {
        try {
          execFileSync(
            analyze,
            ['verify', `--root=${root}`, '--man=no', '/etc/systemd/system/kms-sync-agent.service'],
            { encoding: 'utf8', stdio: 'pipe' },
          );
          return '';
        } catch (e) {
          return String((e as { stderr?: string }).stderr ?? e);
        }
      };
      expect(verify()).toMatch(/is not executable/);
      mkdirSync(path.join(root, 'usr/local/bin'), { recursive: true });
      writeFileSync(path.join(root, 'usr/local/bin/kms-sync'), '#!/bin/sh\n');
      chmodSync(path.join(root, 'usr/local/bin/kms-sync'), 0o755);
      expect(verify()).toBe('');
    },
  );
});
