// The acme setup of ../acme (YAML) as a CDKTF stack: the project, its two environments and their
// templates here; each team's clients, keys and endpoints in its own construct under teams/.
//
//   kms-sync plan --cdktf examples/cdktf        (no Terraform needed: kms-sync runs this app)
//
// Planning this stack and ../acme against the same service gives the same plan.
import { App, TerraformStack, TerraformVariable } from 'cdktf';
import type { Construct } from 'constructs';
import { KmsProject, KmsProvider } from 'kms-sync/cdktf';
import { PartnersTeam } from './teams/partners.ts';
import { PaymentsTeam } from './teams/payments.ts';

export class AcmeStack extends TerraformStack {
  constructor(scope: Construct, id: string) {
    super(scope, id);
    // Service URL and key come from KMS_API_URL / KMS_API_KEY; keys go to the default store
    // (add secretStore blocks here to send them elsewhere, as YAML's stores:).
    new KmsProvider(this, 'kms', { owner: 'acme-platform' });

    // The URLs of your API: TF_VAR_acme_production_url / TF_VAR_acme_staging_url, or terraform.tfvars.
    const productionUrl = new TerraformVariable(this, 'acme_production_url', { type: 'string', default: 'https://api.acme.example' });
    const stagingUrl = new TerraformVariable(this, 'acme_staging_url', { type: 'string', default: 'https://staging.api.acme.example' });

    const acme = new KmsProject(this, 'acme', { slug: 'acme', name: 'Acme Corp', description: 'Public API of Acme Corp', protected: true });

    const production = acme.addEnvironment('production', { url: productionUrl.stringValue, protected: true });
    production.addTemplate('gold', { rateLimitDay: 100000, maxClients: 50 });
    production.addTemplate('silver', { rateLimitDay: 20000, maxClients: 200 });
    production.addTemplate('bronze', { rateLimitDay: 2000, maxClients: 1000 });
    production.addTemplate('internal', { rateLimitDay: 1000000, maxClients: 10 });

    const staging = acme.addEnvironment('staging', { url: stagingUrl.stringValue });
    staging.addTemplate('sandbox', { rateLimitDay: 5000, maxClients: 100 });
    staging.addTemplate('internal', { rateLimitDay: 100000, maxClients: 10 });

    new PaymentsTeam(this, 'payments', { production, staging });
    new PartnersTeam(this, 'partners', { production, staging });
  }
}

const app = new App();
new AcmeStack(app, 'acme');
app.synth();
