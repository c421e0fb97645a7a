import { createServer } from 'node:net';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { generateX25519Identity, identityToRecipient } from 'age-encryption';
import { afterEach, describe, expect, it } from 'vitest';
import { configWorkspace, smallConfig } from './helpers.js';

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0)) await c();
});

const workspace = () => configWorkspace(cleanup);

const withStores = (stores: string, config = smallConfig) =>
  config.replace('apiVersion: kms-sync/v1\n', `apiVersion: kms-sync/v1\nstores:\n${stores}`);
/** One more key, written to `store`. */
const withKeyIn = (store: string, config: string) =>
  config.replace(
    'keys: [{ name: main }] }, { name: app',
    `keys: [{ name: main }, { name: extra, secret: { store: ${store} } }] }, { name: app`,
  );

describe('store hosts: the policy decides for every spelling the backend reads as a host', () => {
  it('azure-kv:// with a host that has no dot (host:port, [IPv6]) is refused at validation, and plan never connects', async () => {
    const w = await workspace();
    // A TCP listener that counts connections: the Key Vault client would send its requests here.
    let connections = 0;
    const server = createServer((s) => {
      connections++;
      s.destroy();
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanup.push(() => new Promise((r) => server.close(r)));
    const port = (server.address() as AddressInfo).port;
    const azure = {
      AZURE_TENANT_ID: 'tenant',
      AZURE_CLIENT_ID: 'client',
      AZURE_CLIENT_SECRET: 'azure-client-secret-1',
    };
    for (const [authority, shown] of [
      [`localhost:${port}`, `localhost:${port}`],
      ['[2001:db8::1]:8443', '[2001:db8::1]:8443'],
      ['vaulthost', undefined], // a Key Vault name (vaulthost.vault.azure.net): no host of the configuration's choosing
    ] as const) {
      w.write(withKeyIn('az', withStores(`  - { name: az, uri: "azure-kv://${authority}/" }\n`)));
      const validate = await w.cli(['validate', '-f', '.']);
      if (shown === undefined) {
        expect(validate.code, validate.stderr).toBe(0);
        continue;
      }
      expect(validate.code, validate.stdout).toBe(1);
      expect(validate.stderr).toContain(
        `stores[0].uri: store "az" would send its credentials to ${shown} (the Key Vault host of the URI), a host the operator policy does not allow`,
      );
      const plan = await w.cli(['plan', '-f', '.'], azure);
      expect(plan.code).toBe(1);
      expect(plan.stderr).toContain('stores.hosts in the operator policy');
    }
    expect(connections).toBe(0);
    // Allowed by the operator, the same declaration validates.
    w.write(withKeyIn('az', withStores(`  - { name: az, uri: "azure-kv://localhost:${port}/" }\n`)));
    const allowed = await w.cli(['validate', '-f', '.'], { KMS_SYNC_STORE_HOSTS: `localhost:${port}` });
    expect(allowed.code, allowed.stderr).toBe(0);
  });

  it('a store file outside the configuration folder is refused without naming where the folder or the file is', async () => {
    const w = await workspace();
    w.write(withStores('  - { name: out, default: true, uri: "sops:../../elsewhere/secrets.sops.yaml" }\n'));
    const r = await w.cli(['validate', '-f', '.']);
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /stores\[0\]\.uri: store "out" \(sops:\.\.\/\.\.\/elsewhere\/secrets\.sops\.yaml\) resolves outside the folder store files stay in \(the configuration folder; the agent's STATE\/store\), and the operator policy keeps store files inside it/,
    );
    expect(r.stderr).not.toContain(path.dirname(w.dir));
  });
});

describe('recipients: every one a declaration adds is in the pull-request comment', () => {
  async function attackerRecipient() {
    return identityToRecipient(await generateX25519Identity());
  }

  it('a new store whose options push its recipients past the cut of a long line', async () => {
    const w = await workspace();
    const evil = await attackerRecipient();
    // Options are shown sorted by name: "note" comes before "recipients".
    const note = 'Audit copy for the compliance team, reviewed and approved in SEC-1234. '.repeat(5);
    w.write(
      withKeyIn(
        'audit',
        withStores(
          `  - { name: audit, uri: "sops:audit.sops.yaml", options: { recipients: [${evil}], note: "${note}" } }\n`,
        ),
      ),
    );
    const md = await w.cli(['plan', '-f', '.', '--format', 'markdown']);
    expect(md.code, md.stderr).toBe(0);
    expect(md.stdout).toContain('store audit: new');
    expect(md.stdout).toContain(evil);
    const text = await w.cli(['plan', '-f', '.']);
    expect(text.stdout).toContain(evil);
  });

  it('the store with the recipient declared after twenty others', async () => {
    const w = await workspace();
    const evil = await attackerRecipient();
    const padding = Array.from({ length: 20 }, (_, i) => `  - { name: s${i}, uri: "sops:s${i}.sops.yaml" }\n`).join('');
    w.write(
      withKeyIn(
        'zz',
        withStores(`${padding}  - { name: zz, uri: "sops:zz.sops.yaml", options: { recipients: [${evil}] } }\n`),
      ),
    );
    const md = await w.cli(['plan', '-f', '.', '--format', 'markdown']);
    expect(md.code, md.stderr).toBe(0);
    expect(md.stdout).toContain('Security changes (21)');
    expect(md.stdout).toContain(evil);
  });
});

describe('protection: a plan that drops or sets it says so', () => {
  it("removing protected: true (or setting it through the metadata marker) is shown as protected, not as kms-sync's own markers", async () => {
    const w = await workspace();
    const protectedWeb = smallConfig.replace(
      '{ name: web, template: std,',
      '{ name: web, template: std, protected: true,',
    );
    w.write(protectedWeb);
    const applied = await w.cli(['apply', '-f', '.', '--auto-approve']);
    expect(applied.code, applied.stderr).toBe(0);
    w.write(smallConfig);
    const text = await w.cli(['plan', '-f', '.', '--detailed-exitcode']);
    expect(text.code, text.stderr).toBe(2);
    expect(text.stdout).toContain('~ protected = true -> false');
    expect(text.stdout).not.toContain("only kms-sync's own markers change");
    const md = await w.cli(['plan', '-f', '.', '--format', 'markdown']);
    expect(md.stdout).toContain('| <code>protected</code> | <code>true</code> | <code>false</code> |');
    // Set back through the marker itself, in metadata: shown the same way.
    w.write(
      smallConfig.replace(
        '{ name: web, template: std,',
        '{ name: web, template: std, metadata: { "kms-sync/protected": "true" },',
      ),
    );
    const applied2 = await w.cli(['apply', '-f', '.', '--auto-approve']);
    expect(applied2.code, applied2.stderr).toBe(0);
    w.write(smallConfig);
    const again = await w.cli(['plan', '-f', '.']);
    expect(again.stdout).toContain('~ protected = true -> false');
  });
});
