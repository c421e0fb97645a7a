// Opt-in: the same contract against real accounts. Skipped unless the environment names one:
//   KMS_SYNC_TEST_AWS_REGION    (+ standard AWS credentials; KMS_SYNC_TEST_AWS_PREFIX, default kms-sync-test)
//   KMS_SYNC_TEST_GCP_PROJECT   (+ Application Default Credentials; KMS_SYNC_TEST_GCP_PREFIX, default kms-sync-test)
//   KMS_SYNC_TEST_AZURE_VAULT   (+ DefaultAzureCredential; KMS_SYNC_TEST_AZURE_PREFIX, default kms-sync-test)
// Every run writes under a fresh random logical prefix and deletes what it wrote afterwards
// (AWS: force delete; GCP: delete; Azure: delete, then purge when allowed).
import { describe, it } from 'vitest';
import { AWS_NAME_RE, openAwsSecretsManagerStore } from '../../../src/secrets/backends/aws.js';
import { AZURE_NAME_RE, openAzureKeyVaultStore } from '../../../src/secrets/backends/azure.js';
import { GCP_NAME_RE, openGcpSecretManagerStore } from '../../../src/secrets/backends/gcp.js';
import { storeContract } from './contract.js';
import { skipWhen } from '../../support/skip.js';

const env = process.env;

if (env.KMS_SYNC_TEST_AWS_REGION) {
  const region = env.KMS_SYNC_TEST_AWS_REGION;
  storeContract(`aws-sm real account (${region})`, async () => {
    const store = await openAwsSecretsManagerStore(
      `aws-sm://${region}/${env.KMS_SYNC_TEST_AWS_PREFIX ?? 'kms-sync-test'}`,
    );
    const sdk = await import('@aws-sdk/client-secrets-manager');
    return {
      store,
      legal: AWS_NAME_RE,
      cleanup: async (names) => {
        for (const n of names) {
          await store.client
            .send(new sdk.DeleteSecretCommand({ SecretId: n, ForceDeleteWithoutRecovery: true }))
            .catch(() => undefined);
        }
      },
    };
  });
} else {
  describe.skipIf(skipWhen(true, 'aws-sm real account: set KMS_SYNC_TEST_AWS_REGION (and AWS credentials) to run it'))(
    'aws-sm real account',
    () => it('contract', () => undefined),
  );
}

if (env.KMS_SYNC_TEST_GCP_PROJECT) {
  const project = env.KMS_SYNC_TEST_GCP_PROJECT;
  storeContract(`gcp-sm real project (${project})`, async () => {
    const store = await openGcpSecretManagerStore(
      `gcp-sm://projects/${project}/${env.KMS_SYNC_TEST_GCP_PREFIX ?? 'kms-sync-test'}`,
    );
    return {
      store,
      legal: GCP_NAME_RE,
      cleanup: async (names) => {
        for (const n of names)
          await store.client.deleteSecret({ name: `projects/${project}/secrets/${n}` }).catch(() => undefined);
      },
    };
  });
} else {
  describe.skipIf(
    skipWhen(true, 'gcp-sm real project: set KMS_SYNC_TEST_GCP_PROJECT (and Google credentials) to run it'),
  )('gcp-sm real project', () => it('contract', () => undefined));
}

if (env.KMS_SYNC_TEST_AZURE_VAULT) {
  const vault = env.KMS_SYNC_TEST_AZURE_VAULT;
  storeContract(`azure-kv real vault (${vault})`, async () => {
    const store = await openAzureKeyVaultStore(
      `azure-kv://${vault}/${env.KMS_SYNC_TEST_AZURE_PREFIX ?? 'kms-sync-test'}`,
    );
    return {
      store,
      legal: AZURE_NAME_RE,
      cleanup: async (names) => {
        for (const n of names) {
          try {
            await (await store.client.beginDeleteSecret(n)).pollUntilDone();
            await store.client.purgeDeletedSecret(n);
          } catch {
            // best effort: purge needs the purge permission
          }
        }
      },
    };
  });
} else {
  describe.skipIf(
    skipWhen(true, 'azure-kv real vault: set KMS_SYNC_TEST_AZURE_VAULT (and Azure credentials) to run it'),
  )('azure-kv real vault', () => it('contract', () => undefined));
}
