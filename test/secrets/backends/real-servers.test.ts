// Opt-in: the same store contract the fakes pass, against real servers named by the environment.
// Skipped unless set:
//   VAULT_ADDR + VAULT_TOKEN [+ VAULT_NAMESPACE, VAULT_CACERT, KMS_SYNC_TEST_VAULT_MOUNT (default secret)]
//   GITHUB_TOKEN + KMS_SYNC_TEST_GITHUB_REPO=owner/repo [+ KMS_SYNC_TEST_GITHUB_ENVIRONMENT, GITHUB_API_URL]
//   GITLAB_TOKEN + KMS_SYNC_TEST_GITLAB_PROJECT=<id or path> [+ CI_API_V4_URL]
//   KUBECONFIG + KMS_SYNC_TEST_K8S_NAMESPACE
// Everything written goes under a kms-sync-test prefix and is deleted afterwards.
import { request } from 'undici';
import { openGitHubStore } from '../../../src/secrets/backends/github.js';
import { openGitLabStore } from '../../../src/secrets/backends/gitlab.js';
import { loadKubeConfig, openKubernetesStore } from '../../../src/secrets/backends/kubernetes.js';
import { openVaultStore } from '../../../src/secrets/backends/vault.js';
import { defineStoreContract } from './support/contract-suite.js';

const env = process.env;

// ------------------------------------------------------------------ Vault / OpenBao
{
  const on = !!(env.VAULT_ADDR && env.VAULT_TOKEN);
  const addr = on ? new URL(env.VAULT_ADDR!) : undefined;
  const mount = env.KMS_SYNC_TEST_VAULT_MOUNT ?? 'secret';
  const uri = addr ? `vault://${addr.host}/${mount}/kms-sync-test?tls=${addr.protocol === 'https:'}` : '';
  defineStoreContract({
    label: `real Vault at ${env.VAULT_ADDR ?? '(VAULT_ADDR unset)'}`,
    skip: !on,
    open: () => openVaultStore(uri, { env }),
    canRead: true,
    listsMeta: true,
    legalName: /^[A-Za-z0-9._%-]+(\/[A-Za-z0-9._%-]+)*$/,
    cleanup: async (names) => {
      for (const n of names) {
        const path = [mount, 'metadata', 'kms-sync-test', ...n.split('/')].map(encodeURIComponent).join('/');
        await request(new URL(`/v1/${path}`, addr), {
          method: 'DELETE',
          headers: {
            'x-vault-token': env.VAULT_TOKEN!,
            ...(env.VAULT_NAMESPACE ? { 'x-vault-namespace': env.VAULT_NAMESPACE } : {}),
          },
        }).then((r) => r.body.dump());
      }
    },
  });
}

// ------------------------------------------------------------------ GitHub
{
  const on = !!(env.GITHUB_TOKEN && env.KMS_SYNC_TEST_GITHUB_REPO);
  const envName = env.KMS_SYNC_TEST_GITHUB_ENVIRONMENT;
  const target = `${env.KMS_SYNC_TEST_GITHUB_REPO ?? ''}${envName ? `/environments/${encodeURIComponent(envName)}` : ''}`;
  const api = (env.GITHUB_API_URL || 'https://api.github.com').replace(/\/+$/, '');
  defineStoreContract({
    label: `real GitHub repository ${target || '(KMS_SYNC_TEST_GITHUB_REPO unset)'}`,
    skip: !on,
    open: () => openGitHubStore(`github://${target}?prefix=KMS_SYNC_TEST_`, { env }),
    canRead: false,
    listsMeta: false,
    legalName: /^[A-Z_][A-Z0-9_]*$/,
    cleanup: async (names) => {
      const [owner, repo] = (env.KMS_SYNC_TEST_GITHUB_REPO ?? '').split('/');
      const base = envName
        ? `${api}/repos/${owner}/${repo}/environments/${encodeURIComponent(envName)}/secrets`
        : `${api}/repos/${owner}/${repo}/actions/secrets`;
      for (const n of names) {
        await request(`${base}/${n}`, {
          method: 'DELETE',
          headers: {
            authorization: `Bearer ${env.GITHUB_TOKEN}`,
            accept: 'application/vnd.github+json',
            'user-agent': 'kms-sync-test',
            'x-github-api-version': '2022-11-28',
          },
        }).then((r) => r.body.dump());
      }
    },
  });
}

// ------------------------------------------------------------------ GitLab
{
  const on = !!(env.GITLAB_TOKEN && env.KMS_SYNC_TEST_GITLAB_PROJECT);
  const project = env.KMS_SYNC_TEST_GITLAB_PROJECT ?? '';
  const api = (env.CI_API_V4_URL || 'https://gitlab.com/api/v4').replace(/\/+$/, '');
  defineStoreContract({
    label: `real GitLab project ${project || '(KMS_SYNC_TEST_GITLAB_PROJECT unset)'}`,
    skip: !on,
    open: () =>
      openGitLabStore(
        `gitlab://${encodeURIComponent(project)}?environment_scope=kms-sync-test&prefix=KMS_SYNC_TEST_&protected=false`,
        { env },
      ),
    canRead: true,
    listsMeta: true,
    legalName: /^[A-Za-z0-9_]{1,255}$/,
    cleanup: async (names) => {
      for (const n of names) {
        await request(
          `${api}/projects/${encodeURIComponent(project)}/variables/${n}?filter%5Benvironment_scope%5D=kms-sync-test`,
          {
            method: 'DELETE',
            headers: { 'private-token': env.GITLAB_TOKEN! },
          },
        ).then((r) => r.body.dump());
      }
    },
  });
}

// ------------------------------------------------------------------ Kubernetes
{
  const on = !!(env.KUBECONFIG && env.KMS_SYNC_TEST_K8S_NAMESPACE);
  const ns = env.KMS_SYNC_TEST_K8S_NAMESPACE ?? '';
  const del = async (name: string): Promise<void> => {
    const { CoreV1Api } = await import('@kubernetes/client-node');
    const core = (await loadKubeConfig(env, undefined)).makeApiClient(CoreV1Api);
    await core.deleteNamespacedSecret({ name, namespace: ns }).catch(() => undefined);
  };
  defineStoreContract({
    label: `real Kubernetes namespace ${ns || '(KMS_SYNC_TEST_K8S_NAMESPACE unset)'}, one Secret`,
    skip: !on,
    open: () => openKubernetesStore(`kubernetes://${ns}/kms-sync-test`, { env }),
    canRead: true,
    listsMeta: true,
    legalName: /^[-._a-zA-Z0-9]{1,253}$/,
    cleanup: () => del('kms-sync-test'),
  });
  defineStoreContract({
    label: `real Kubernetes namespace ${ns || '(KMS_SYNC_TEST_K8S_NAMESPACE unset)'}, Secret per key`,
    skip: !on,
    open: () => openKubernetesStore(`kubernetes://${ns}?prefix=kms-sync-test.`, { env }),
    canRead: true,
    listsMeta: true,
    legalName: /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/,
    cleanup: async (names) => {
      for (const n of names) await del(n);
    },
  });
}
