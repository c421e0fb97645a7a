// Partners team: partner integrations and the catalogue endpoints they use.
import { Construct } from 'constructs';
import type { TeamEnvironments } from './payments.ts';

export class PartnersTeam extends Construct {
  constructor(scope: Construct, id: string, { production, staging }: TeamEnvironments) {
    super(scope, id);
    const team = { team: 'partners' };

    production.addClient('hooli', {
      type: 'company',
      template: production.template('gold'),
      ipWhitelist: ['198.51.100.10', '198.51.100.11', '2001:db8:42::/48'],
      metadata: { ...team, 'account-manager': 'jane.doe', contract: 'P-2024-017' },
      keys: {
        primary: { ttl: '90d', autoRotate: true },
        'batch-jobs': { ttl: '1w' },
      },
    }, this);
    production.addClient('umbrella', {
      type: 'company',
      template: production.template('bronze'),
      metadata: { ...team, trial: true },
      keys: { primary: { expiresAt: '2026-12-31' } },
    }, this);
    production.addClient('stark-industries', {
      type: 'company',
      template: production.template('silver'),
      ipWhitelist: ['192.0.2.0/24'],
      metadata: { ...team, region: 'us-east' },
      keys: { primary: { ttl: '60d', autoRotate: true } },
    }, this);
    production.addClient('wayne-enterprises', {
      type: 'company',
      template: production.template('gold'),
      ipWhitelist: ['172.16.0.0/12'],
      metadata: { ...team, region: 'eu-west' },
      // Default store; only the secret name is chosen here.
      keys: { primary: { ttl: '90d', autoRotate: true, secretName: 'acme/partners/wayne-enterprises' } },
    }, this);

    production.addEndpoint('GET', '/v1/users/{id}', {
      name: 'Get user',
      description: 'Returns one user profile.',
      response: { type: 'object', properties: { id: { type: 'string' }, email: { type: 'string' } } },
      metadata: team,
    }, this);
    production.addEndpoint('GET', '/v1/catalog', { name: 'List catalogue', metadata: team }, this);
    production.addEndpoint('GET', '/v1/catalog/{sku}', { name: 'Get catalogue item', metadata: team }, this);

    staging.addClient('hooli-sandbox', {
      type: 'company',
      template: staging.template('sandbox'),
      metadata: team,
      keys: { primary: { ttl: '14d' } },
    }, this);
    staging.addEndpoint('GET', '/v1/users/{id}', { name: 'Get user', metadata: team }, this);
  }
}
