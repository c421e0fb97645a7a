// Payments team: its clients and the payment endpoints, in both environments.
import { Construct } from 'constructs';
import type { KmsEnvironment } from 'kms-sync/cdktf';

export interface TeamEnvironments {
  production: KmsEnvironment;
  staging: KmsEnvironment;
}

export class PaymentsTeam extends Construct {
  constructor(scope: Construct, id: string, { production, staging }: TeamEnvironments) {
    super(scope, id);
    const team = { team: 'payments' };

    production.addClient('globex', {
      type: 'company',
      template: production.template('gold'),
      ipWhitelist: ['10.20.0.0/16', '192.168.1.7'],
      metadata: { ...team, contact: 'billing@globex.example' },
      keys: {
        primary: { ttl: '90d', autoRotate: true },
        fallback: { expiresAt: '2027-01-01T00:00:00Z' },
      },
    }, this);
    production.addClient('initech', {
      type: 'company',
      template: production.template('silver'),
      ipWhitelist: ['203.0.113.0/24'],
      metadata: { ...team, tier: 'standard' },
      keys: { primary: { ttl: '30d', autoRotate: true } },
    }, this);
    production.addClient('checkout-service', {
      type: 'internal',
      template: production.template('internal'),
      ipWhitelist: ['10.0.0.0/8'],
      metadata: { ...team, owner: 'checkout' },
      protected: true,
      keys: { primary: { ttl: '180d', autoRotate: true } },
    }, this);
    production.addClient('ledger-service', {
      type: 'internal',
      template: production.template('internal'),
      ipWhitelist: ['10.0.0.0/8'],
      metadata: { ...team, owner: 'ledger' },
      keys: { primary: { ttl: '180d', autoRotate: true } },
    }, this);

    production.addEndpoint('POST', '/v1/payments', {
      name: 'Create payment',
      description: 'Charges a payment method.',
      request: { type: 'object', required: ['amount', 'currency'] },
      response: { type: 'object' },
      metadata: team,
    }, this);
    production.addEndpoint('GET', '/v1/payments/{id}', { name: 'Get payment', metadata: team }, this);
    production.addEndpoint('POST', '/v1/refunds', { name: 'Create refund', metadata: team }, this);

    staging.addClient('globex-sandbox', {
      type: 'company',
      template: staging.template('sandbox'),
      metadata: team,
      keys: { primary: { ttl: '14d' } },
    }, this);
    staging.addEndpoint('POST', '/v1/payments', { name: 'Create payment', metadata: team }, this);
  }
}
