// Plan objects built directly, for renderer and drift tests that need no service.
import type { KeyFinding, Operation, Plan, UnmanagedResource } from '../../src/plan/types.js';
import { summarize } from '../../src/plan/types.js';

export function makePlan(
  o: {
    operations?: Operation[];
    unmanaged?: UnmanagedResource[];
    keyFindings?: KeyFinding[];
    warnings?: string[];
    envs?: string[];
    credential?: Plan['target']['credential'];
  } = {},
): Plan {
  const operations = o.operations ?? [];
  const unmanaged = o.unmanaged ?? [];
  return {
    formatVersion: 1,
    generatedAt: '2026-01-02T03:04:05.000Z',
    target: {
      url: 'https://kms.example/api/v1',
      credential: o.credential ?? 'test',
      envs: o.envs ?? ['shop-production', 'shop-staging'],
      projects: ['shop'],
      owner: 'github.com/acme/shop:kms',
    },
    options: { prune: false },
    operations,
    unmanaged,
    keyFindings: o.keyFindings ?? [],
    warnings: o.warnings ?? [],
    summary: summarize(operations, unmanaged),
    stores: [],
    fingerprints: {},
  };
}

export const op = (p: Partial<Operation> & Pick<Operation, 'address' | 'action'>): Operation => ({
  kind: p.address.split('.')[0] as Operation['kind'],
  projectEnv: p.address.split('.')[1]?.split('/')[0],
  reason: `${p.action} reason`,
  actionReason:
    p.action === 'create'
      ? 'create_missing'
      : p.action === 'delete'
        ? 'delete_removed_from_config'
        : p.action === 'replace'
          ? 'replace_immutable_field'
          : p.action === 'rotate'
            ? 'rotate_expiring'
            : 'update_changed',
  before: p.action === 'create' ? null : { name: 'x' },
  after: p.action === 'delete' ? null : { name: 'y' },
  changes: [],
  ...p,
});

/** A plan with every action in two environments. */
export function mixedPlan(credential: Plan['target']['credential'] = 'test'): Plan {
  return makePlan({
    credential,
    operations: [
      op({
        address: 'client.shop-production/hooli',
        action: 'create',
        after: {
          name: 'hooli',
          template: 'gold',
          metadata: { 'managed-by': 'kms-sync' },
          keys: [{ name: 'main', secret: { name: 'shop-production/hooli/main' } }],
        },
        issuesKeys: 1,
      }),
      op({ address: 'client.shop-staging/hooli', action: 'create', after: { name: 'hooli', template: 'bronze' } }),
      op({
        address: 'client.shop-production/globex',
        action: 'update',
        reason: 'ipWhitelist changed',
        changes: [{ path: 'ipWhitelist', before: ['0.0.0.0/0'], after: ['10.0.0.0/8'] }],
      }),
      op({
        address: 'endpoint.shop-production/GET:/v1/orders',
        action: 'replace',
        reason: 'request cannot be updated in place',
        changes: [{ path: 'request', before: {}, after: { type: 'object' } }],
      }),
      op({
        address: 'key.shop-production/globex/primary',
        action: 'rotate',
        reason: 'expires in 3d',
        actionReason: 'rotate_expiring',
      }),
      op({
        address: 'client.shop-staging/old',
        action: 'delete',
        reason: 'removed from the configuration (created by kms-sync)',
        before: { name: 'old', template: 'bronze' },
      }),
    ],
    unmanaged: [
      {
        address: 'endpoint.shop-production/GET:/sdk/x',
        kind: 'endpoint',
        projectEnv: 'shop-production',
        note: 'not in the configuration; kept',
      },
    ],
    keyFindings: [
      {
        address: 'key.shop-production/globex/primary',
        projectEnv: 'shop-production',
        finding: 'expiring',
        expiresAt: '2026-01-05T00:00:00Z',
        detail: 'expires in 3d',
        rotationPlanned: true,
      },
      {
        address: 'key.shop-staging/globex/main',
        projectEnv: 'shop-staging',
        finding: 'secret_missing',
        detail: 'its secret is not in its store',
        rotationPlanned: false,
      },
    ],
  });
}
