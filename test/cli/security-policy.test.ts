// Issue 34: a configuration is reviewed data, never authority. Each attack of the issue's "What
// was seen" (items 1, 3, 4, 5) is mounted by a "pull request" (an edited configuration) against the
// built CLI; the operator policy (KMS_SYNC_POLICY / --policy, KMS_SYNC_* variables, flags) decides
// what the configuration may reach, and security changes are plan changes.
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { generateX25519Identity, identityToRecipient } from 'age-encryption';
import { afterEach, describe, expect, it } from 'vitest';
import { configWorkspace as sharedWorkspace, smallConfig } from './helpers.js';
import { patient } from '../support/patience.js';

const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0)) await c();
});

/** The small configuration in a folder of its own, with an emulator (for the tests that only validate). */
const configWorkspace = () => sharedWorkspace(cleanup);

/** The same, applied once: the default store holds the first keys. */
async function workspaceWithKeys() {
  const w = await configWorkspace();
  const applied = await w.cli(['apply', '-f', '.', '--auto-approve']);
  expect(applied.code, applied.stderr).toBe(0);
  return w;
}

const withStores = (stores: string, config = smallConfig) =>
  config.replace('apiVersion: kms-sync/v1\n', `apiVersion: kms-sync/v1\nstores:\n${stores}`);
/** One more key, so that apply writes the default store. */
const withNewKey = (config: string) =>
  config.replace('keys: [{ name: main }] }, { name: app', 'keys: [{ name: main }, { name: extra }] }, { name: app');

/** An attacker's age identity, in a key file of its own. */
async function attacker(dir: string) {
  const identity = await generateX25519Identity();
  const keyFile = path.join(dir, 'attacker-age.txt');
  writeFileSync(keyFile, `${identity}\n`, { mode: 0o600 });
  return { recipient: await identityToRecipient(identity), keyFile };
}

const storeFile = (dir: string) => readFileSync(path.join(dir, '.kms-sync', 'secrets.sops.yaml'), 'utf8');

describe('item 1: a recipient applies only to the store that declares it, and adding one is a plan change', () => {
  it('an unused store declaring the attacker: the default store never gains them, and the attacker cannot read keys issued before', async () => {
    const w = await workspaceWithKeys();
    const evil = await attacker(w.dir);
    w.write(
      withNewKey(
        withStores(`  - { name: audit, uri: "sops:audit.sops.yaml", options: { recipients: [${evil.recipient}] } }\n`),
      ),
    );
    const plan = await w.cli(['plan', '-f', '.', '--detailed-exitcode']);
    expect(plan.code, plan.stderr).toBe(2);
    expect(plan.stdout).toContain('Security changes (1)');
    expect(plan.stdout).toContain(`store audit: new (sops:audit.sops.yaml {"recipients":["${evil.recipient}"]})`);
    const applied = await w.cli(['apply', '-f', '.', '--auto-approve']);
    expect(applied.code, applied.stderr).toBe(0);
    expect(storeFile(w.dir)).not.toContain(evil.recipient);
    // The attacker's identity opens nothing in the default store: neither the old key nor the new one.
    for (const name of ['shop-staging/web/main', 'shop-staging/web/extra']) {
      const read = await w.cli(['secrets', 'list', '-f', '.', '--reveal', name], { SOPS_AGE_KEY_FILE: evil.keyFile });
      expect(read.code).not.toBe(0);
      expect(read.stdout).not.toMatch(/kmsc_/);
    }
    // Recorded: planning the same configuration again is no change.
    const again = await w.cli(['plan', '-f', '.', '--detailed-exitcode']);
    expect(again.code, again.stdout + again.stderr).toBe(0);
  });

  it(
    'a recipient added to the store that holds the keys: shown in text, JSON and Markdown, exit 2, refused by apply (also from a saved plan) until --allow-new-recipients',
    async () => {
      const w = await workspaceWithKeys();
      const evil = await attacker(w.dir);
      const before = storeFile(w.dir);
      w.write(
        withNewKey(
          withStores(
            `  - { name: main, default: true, uri: "sops:.kms-sync/secrets.sops.yaml", options: { recipients: [${evil.recipient}] } }\n`,
          ),
        ),
      );
      const line = `store main: + recipient ${evil.recipient} (could decrypt the 2 secret(s) it holds now: apply needs --allow-new-recipients)`;
      const text = await w.cli(['plan', '-f', '.', '--detailed-exitcode']);
      expect(text.code, text.stderr).toBe(2);
      expect(text.stdout).toContain(line);
      const json = await w.cli(['plan', '-f', '.', '--json']);
      const parsed = JSON.parse(json.stdout);
      expect(parsed.security_changes).toContainEqual(
        expect.objectContaining({ kind: 'recipient_added', store: 'main', value: evil.recipient, holds: 2 }),
      );
      expect(parsed.summary.security_changes).toBeGreaterThanOrEqual(1);
      const md = await w.cli(['plan', '-f', '.', '--format', 'markdown']);
      expect(md.stdout).toContain('Security changes');
      expect(md.stdout).toContain(evil.recipient);

      const refused = await w.cli(['apply', '-f', '.', '--auto-approve']);
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain(
        'refusing to apply: the plan adds recipients to secret stores that already hold keys',
      );
      expect(refused.stderr).toContain('--allow-new-recipients');
      expect(storeFile(w.dir)).toBe(before);
      const saved = await w.cli(['plan', '-f', '.', '--out', 'pr.plan.json']);
      expect(saved.code, saved.stderr).toBe(0);
      const fromSaved = await w.cli(['apply', 'pr.plan.json']);
      expect(fromSaved.code).toBe(1);
      expect(fromSaved.stderr).toContain('refusing to apply');
      expect(storeFile(w.dir)).toBe(before);
      const read = await w.cli(['secrets', 'list', '-f', '.', '--reveal', 'shop-staging/web/main'], {
        SOPS_AGE_KEY_FILE: evil.keyFile,
      });
      expect(read.code).not.toBe(0);

      // The operator allows it: the recipient is added (and can read), and the plan is settled.
      const allowed = await w.cli(['apply', '-f', '.', '--auto-approve', '--allow-new-recipients']);
      expect(allowed.code, allowed.stderr).toBe(0);
      expect(storeFile(w.dir)).toContain(evil.recipient);
      const opened = await w.cli(['secrets', 'list', '-f', '.', '--reveal', 'shop-staging/web/main'], {
        SOPS_AGE_KEY_FILE: evil.keyFile,
      });
      expect(opened.code, opened.stderr).toBe(0);
      expect((await w.cli(['plan', '-f', '.', '--detailed-exitcode'])).code).toBe(0);
    },
    patient(60_000),
  );

  it('a recipient list in the operator policy refuses any other at validation, with file:line and the setting', async () => {
    const w = await configWorkspace();
    const evil = await attacker(w.dir);
    w.write(
      withStores(`  - { name: audit, uri: "sops:audit.sops.yaml", options: { recipients: [${evil.recipient}] } }\n`),
    );
    const r = await w.cli(['validate', '-f', '.'], {
      KMS_SYNC_RECIPIENTS: 'age1qyqszqgpqyqszqgpqyqszqgpqyqszqgpqyqszqgpqyqszqgpqyqs3290gq',
    });
    expect(r.code).toBe(1);
    expect(r.stderr).toMatch(
      /kms-sync\.yaml:3:\d+: stores\[0\]\.options\.recipients: store "audit" adds the age recipient age1\S+, which the operator policy does not allow/,
    );
    expect(r.stderr).toContain('recipients.allow in the operator policy');
  });
});

describe('item 3: ${env:} reads only what the operator policy allows', () => {
  const credentials: Record<string, string> = {
    PGPASSWORD: 'pg-' + 'S3cret'.repeat(3),
    MYSQL_PWD: 'my-' + 'S3cret'.repeat(3),
    SLACK_WEBHOOK_URL: 'https://hooks.slack.com/services/T000/B000/' + 'x'.repeat(24),
    KUBE_CONFIG_DATA: 'a3ViZWNvbmZpZw' + 'Q'.repeat(20),
    DOCKERHUB_PAT: 'dckr-' + 'P4t'.repeat(6),
    LDAP_BIND_PW: 'ldap-' + 'S3cret'.repeat(3),
    GIT_CONFIG_VALUE_0: 'gitcfg-' + 'V4lue'.repeat(4),
  };

  it('the credentials a denylist missed: refused at file:line, the error says how to allow each, no value is printed', async () => {
    const w = await workspaceWithKeys();
    const metadata = Object.keys(credentials)
      .map((n, i) => `m${i}: "\${env:${n}}"`)
      .join(', ');
    w.write(
      smallConfig.replace('{ name: web, template: std,', `{ name: web, template: std, metadata: { ${metadata} },`),
    );
    for (const format of [[], ['--json'], ['--format', 'markdown']]) {
      const r = await w.cli(['plan', '-f', '.', ...format], credentials);
      expect(r.code).toBe(1);
      for (const name of Object.keys(credentials)) {
        expect(r.stderr).toContain(`environment variable ${name} is not allowed by the operator policy`);
        expect(r.stderr).toContain(`KMS_SYNC_ENV_ALLOW=${name}`);
      }
      expect(r.stderr).toMatch(
        /kms-sync\.yaml:\d+:\d+: projects\[0\]\.environments\[0\]\.clients\[0\]\.metadata\.m0: /,
      );
      for (const value of Object.values(credentials)) expect(r.stdout + r.stderr).not.toContain(value);
    }
  });

  it('an allowed variable is read and shown as a security change; a default is used while an unlisted variable is unset; a credential stays refused even when listed', async () => {
    const w = await workspaceWithKeys();
    w.write(
      smallConfig
        .replace('url: https://s.example', 'url: ${env:SHOP_URL:-https://s.example}')
        .replace('{ name: web, template: std,', '{ name: web, template: std, metadata: { stage: "${env:STAGE}" },'),
    );
    const unset = await w.cli(['plan', '-f', '.'], { STAGE: 'blue' });
    expect(unset.code).toBe(1);
    expect(unset.stderr).toContain('environment variable STAGE is not allowed by the operator policy');
    expect(unset.stderr).not.toContain('SHOP_URL');
    const allowed = await w.cli(['plan', '-f', '.', '--detailed-exitcode', '--allow-env', 'STAGE'], { STAGE: 'blue' });
    expect(allowed.code, allowed.stderr).toBe(2);
    expect(allowed.stdout).toContain('reads the environment variable STAGE (${env:STAGE})');
    const setButUnlisted = await w.cli(['plan', '-f', '.'], {
      STAGE: 'blue',
      KMS_SYNC_ENV_ALLOW: 'STAGE',
      SHOP_URL: 'https://other.example',
    });
    expect(setButUnlisted.code).toBe(1);
    expect(setButUnlisted.stderr).toContain('environment variable SHOP_URL is not allowed');
    const credential = await w.cli(['plan', '-f', '.'], {
      STAGE: credentials.PGPASSWORD!.replace(/.*/, 'sk_live_' + 'a'.repeat(24)),
      KMS_SYNC_ENV_ALLOW: 'STAGE',
    });
    expect(credential.code).toBe(1);
    expect(credential.stderr).toContain('environment variable STAGE holds a credential');
  });

  it('a policy file inside the configuration folder (or its checkout) is refused; one outside is read', async () => {
    const w = await workspaceWithKeys();
    w.write(
      smallConfig.replace(
        '{ name: web, template: std,',
        '{ name: web, template: std, metadata: { stage: "${env:STAGE}" },',
      ),
    );
    const policy = 'apiVersion: kms-sync-policy/v1\nenv:\n  allow: [STAGE]\n';
    writeFileSync(path.join(w.dir, 'policy.yaml'), policy);
    const inside = await w.cli(['plan', '-f', '.', '--policy', 'policy.yaml'], { STAGE: 'blue' });
    expect(inside.code).toBe(1);
    expect(inside.stderr).toContain('the policy file is inside the configuration folder');
    rmSync(path.join(w.dir, 'policy.yaml'));
    const outsideDir = path.join(os.tmpdir(), `kms-sync-policy-${process.pid}-${Date.now()}`);
    mkdirSync(outsideDir);
    cleanup.push(() => rmSync(outsideDir, { recursive: true, force: true }));
    writeFileSync(path.join(outsideDir, 'policy.yaml'), policy);
    const outside = await w.cli(['plan', '-f', '.'], {
      STAGE: 'blue',
      KMS_SYNC_POLICY: path.join(outsideDir, 'policy.yaml'),
    });
    expect(outside.code, outside.stderr).toBe(0);
    writeFileSync(path.join(outsideDir, 'policy.yaml'), 'apiVersion: kms-sync-policy/v1\nenv:\n  allwo: [STAGE]\n');
    const typo = await w.cli(['plan', '-f', '.'], {
      STAGE: 'blue',
      KMS_SYNC_POLICY: path.join(outsideDir, 'policy.yaml'),
    });
    expect(typo.code).toBe(1);
    expect(typo.stderr).toContain('env.allwo: unknown setting (known: allow)');
  });
});

describe('item 4: the operator policy, not the configuration, picks the hosts and CAs store credentials go to', () => {
  async function loggingServer() {
    const requests: { url: string; headers: IncomingHttpHeaders }[] = [];
    const server = createServer((req, res) => {
      requests.push({ url: req.url ?? '', headers: req.headers });
      res.writeHead(404, { 'content-type': 'application/json' }).end('{"errors":[]}');
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
    cleanup.push(
      () =>
        new Promise((r) => {
          server.closeAllConnections();
          server.close(r);
        }),
    );
    return { hostPort: `127.0.0.1:${(server.address() as AddressInfo).port}`, requests };
  }
  const VAULT_TOKEN = 'hvs.' + 'V4ultT0ken'.repeat(3);

  it('vault://host?cacert=./evil-ca.pem and aws-sm endpoint=: refused at validation before any request; VAULT_TOKEN never sent', async () => {
    const w = await workspaceWithKeys();
    const server = await loggingServer();
    writeFileSync(path.join(w.dir, 'evil-ca.pem'), '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n');
    w.write(
      withStores(
        `  - { name: pr, default: true, uri: "vault://${server.hostPort}/secret/kms?cacert=./evil-ca.pem" }\n  - { name: aws, uri: "aws-sm://us-east-1/kms?endpoint=https://${server.hostPort}" }\n`,
      ),
    );
    for (const command of [
      ['validate', '-f', '.'],
      ['plan', '-f', '.'],
      ['apply', '-f', '.', '--auto-approve'],
    ]) {
      const r = await w.cli(command, { VAULT_TOKEN });
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(
        new RegExp(
          `kms-sync\\.yaml:3:\\d+: stores\\[0\\]\\.uri: store "pr" would send its credentials to ${server.hostPort.replace('.', '\\.')} \\(the Vault server of the URI\\), a host the operator policy does not allow`,
        ),
      );
      expect(r.stderr).toContain('stores.hosts in the operator policy');
      expect(r.stderr).toMatch(
        /stores\[0\]\.uri: store "pr" would trust the CA file "\.\/evil-ca\.pem", which the operator policy does not allow/,
      );
      expect(r.stderr).toMatch(
        /stores\[1\]\.uri: store "aws" would send its credentials to 127\.0\.0\.1:\d+ \(its endpoint override\)/,
      );
    }
    // The host allowed by the operator: the CA the configuration chose is still refused.
    const hostOnly = await w.cli(['plan', '-f', '.'], { VAULT_TOKEN, KMS_SYNC_STORE_HOSTS: server.hostPort });
    expect(hostOnly.code).toBe(1);
    expect(hostOnly.stderr).toContain('stores.caFiles in the operator policy');
    expect(hostOnly.stderr).not.toContain('store "pr" would send its credentials');
    expect(server.requests).toEqual([]);
    expect(hostOnly.stdout + hostOnly.stderr).not.toContain(VAULT_TOKEN);
  });

  it('a saved plan whose stores the policy of the apply refuses is refused before anything is sent', async () => {
    const w = await workspaceWithKeys();
    const server = await loggingServer();
    w.write(withStores(`  - { name: pr, uri: "vault://${server.hostPort}/secret/kms?tls=false" }\n`));
    const saved = await w.cli(['plan', '-f', '.', '--no-secret-check', '--out', 'pr.plan.json'], {
      KMS_SYNC_STORE_HOSTS: server.hostPort,
    });
    expect(saved.code, saved.stderr).toBe(0);
    const r = await w.cli(['apply', 'pr.plan.json'], { VAULT_TOKEN });
    expect(r.code).toBe(1);
    expect(r.stderr).toContain('the operator policy refuses its stores');
    expect(server.requests).toEqual([]);
  });
});

describe('item 5: store files stay inside the configuration folder unless the policy allows more', () => {
  it('sops:../ and absolute paths are refused with file:line; KMS_SYNC_STORES_OUTSIDE_ROOT=1 allows them', async () => {
    const w = await configWorkspace();
    const outside = path.join(path.dirname(w.dir), `${path.basename(w.dir)}-outside.sops.yaml`);
    cleanup.push(() => rmSync(outside, { force: true }));
    for (const uri of [`sops:../${path.basename(outside)}`, `sops://${outside}`]) {
      w.write(withStores(`  - { name: out, default: true, uri: "${uri}" }\n`));
      const r = await w.cli(['validate', '-f', '.']);
      expect(r.code).toBe(1);
      expect(r.stderr).toMatch(
        /kms-sync\.yaml:3:\d+: stores\[0\]\.uri: store "out" \(sops:\S+\) resolves outside the folder store files stay in \(the configuration folder; the agent's STATE\/store\), and the operator policy keeps store files inside it/,
      );
      expect(r.stderr).toContain('KMS_SYNC_STORES_OUTSIDE_ROOT=1');
    }
    const allowed = await w.cli(['validate', '-f', '.'], { KMS_SYNC_STORES_OUTSIDE_ROOT: '1' });
    expect(allowed.code, allowed.stderr).toBe(0);
  });
});
