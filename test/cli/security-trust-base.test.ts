// Issue 34, what was left open: the records a pull request can edit, and a recipient removed from a
// store's declaration. Mounted against the built CLI and real git / Debian's `age`:
// - a pull request edits `.kms-sync/trust.json` (the record of the last apply) to hide its new store,
//   its attacker recipient and its new `${env:}` read: a plan in CI compares with the base
//   revision's record (git), shows the edit, and says so when the base cannot be read;
// - a recipient removed from a store's declaration: apply re-keys the store file, so the removed
//   age identity opens nothing in it (its stanza is gone, its old data key opens no value).
import { execFile } from 'node:child_process';
import { createDecipheriv, randomUUID } from 'node:crypto';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { crc32 } from 'node:zlib';
import { generateX25519Identity, identityToRecipient } from 'age-encryption';
import { afterEach, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { SopsFileStore } from '../../src/secrets/sops/file-store.js';
import { runCli } from '../support/cli.js';
import { scratchDir } from '../support/scratch.js';
import { skipWhen } from '../support/skip.js';
import { setup, smallConfig, TEST_KEY } from './helpers.js';
import { patient } from '../support/patience.js';

const run = promisify(execFile);
const cleanup: (() => unknown)[] = [];
afterEach(async () => {
  for (const c of cleanup.splice(0)) await c();
});

const gitEnv = {
  PATH: process.env.PATH,
  HOME: process.env.HOME,
  GIT_CONFIG_NOSYSTEM: '1',
  GIT_CONFIG_GLOBAL: '/dev/null',
  GIT_AUTHOR_NAME: 't',
  GIT_AUTHOR_EMAIL: 't@example.com',
  GIT_COMMITTER_NAME: 't',
  GIT_COMMITTER_EMAIL: 't@example.com',
};
const git = (cwd: string, ...args: string[]) => run('git', args, { cwd, env: gitEnv });

/** An age identity of its own (a key file), and its recipient. */
async function identity(dir: string, name: string) {
  const id = await generateX25519Identity();
  const keyFile = path.join(dir, `${name}-age.txt`);
  writeFileSync(keyFile, `${id}\n`, { mode: 0o600 });
  return { recipient: await identityToRecipient(id), keyFile };
}

/** `config` applied (keys in the default store), then committed on main with its records, as the apply job commits them. */
async function appliedOnMain(config: string) {
  const s = await setup({ 'kms-sync.yaml': config, '.gitignore': '*-age.txt\nage.txt\n' });
  cleanup.push(
    () => s.emu.close(),
    () => rmSync(s.dir, { recursive: true, force: true }),
  );
  const applied = await runCli(['apply', '-f', '.', '--auto-approve'], { env: s.env, cwd: s.dir });
  expect(applied.code, applied.stderr).toBe(0);
  await git(s.dir, 'init', '-q', '-b', 'main');
  await git(s.dir, 'add', '-A');
  await git(s.dir, 'commit', '-q', '-m', 'main: applied');
  return s;
}

const withStores = (stores: string, config: string) =>
  config.replace('apiVersion: kms-sync/v1\n', `apiVersion: kms-sync/v1\nstores:\n${stores}`);

describe('a pull request cannot hide its security changes by editing the trust record', () => {
  it(
    "a plan in CI compares with the base branch's record (from git), shows the edit, and says when the base cannot be read",
    async () => {
      // main: a configuration applied (keys in the default store), its records committed by the apply job.
      const config = `owner: shop-team\n${smallConfig}`;
      const s = await appliedOnMain(config);

      // The pull request: a store for the attacker, a new ${env:} read, and the record edited to match.
      const evil = await identity(s.dir, 'attacker');
      const store = `sops:audit.sops.yaml {"recipients":["${evil.recipient}"]}`;
      await git(s.dir, 'checkout', '-q', '-b', 'pr');
      writeFileSync(
        path.join(s.dir, 'kms-sync.yaml'),
        withStores(
          `  - { name: audit, uri: "sops:audit.sops.yaml", options: { recipients: [${evil.recipient}] } }\n`,
          config.replace('url: https://s.example', 'url: "https://s.example/${env:STAGE}"'),
        ),
      );
      const record = path.join(s.dir, '.kms-sync', 'trust.json');
      const edited = JSON.parse(readFileSync(record, 'utf8'));
      for (const set of [
        edited,
        ...Object.values<{ stores: Record<string, string>; env: string[] }>(edited.targets ?? {}),
      ]) {
        set.stores = { ...set.stores, audit: store };
        set.env = ['STAGE'];
      }
      writeFileSync(record, JSON.stringify(edited));
      await git(s.dir, 'commit', '-q', '-am', 'pr: audit store');
      await git(s.dir, 'checkout', '-q', 'main');

      const ciEnv = {
        ...s.env,
        KMS_SYNC_ENV_ALLOW: 'STAGE',
        STAGE: 'blue',
        GITHUB_ACTIONS: 'true',
        GITHUB_EVENT_NAME: 'pull_request',
        GITHUB_BASE_REF: 'main',
      };
      // The pull request's checkout, as actions/checkout with the base fetched: origin/main is there.
      const full = path.join(scratchDir(), 'pr');
      await git(path.dirname(full), 'clone', '-q', '-b', 'pr', s.dir, full);
      const plan = await runCli(['plan', '-f', '.', '--detailed-exitcode'], { env: ciEnv, cwd: full });
      expect(plan.code, plan.stdout + plan.stderr).toBe(2);
      expect(plan.stdout).toMatch(
        /Security changes \(3\): .* \(compared with the base origin\/main \([0-9a-f]{12}\)\)/,
      );
      expect(plan.stdout).toContain('.kms-sync/trust.json: edited by this change');
      expect(plan.stdout).toContain(`store audit: new (${store})`);
      expect(plan.stdout).toContain('reads the environment variable STAGE');
      const json = JSON.parse((await runCli(['plan', '-f', '.', '--json'], { env: ciEnv, cwd: full })).stdout);
      expect(json.trust_base).toMatch(/^origin\/main \([0-9a-f]{12}\)$/);
      expect(json.security_changes.map((c: { kind: string }) => c.kind).sort()).toEqual([
        'env_read',
        'record_edited',
        'store_added',
      ]);
      // --trust-base names the base outside CI (a local branch, else origin/BRANCH).
      const local = await runCli(['plan', '-f', '.', '--detailed-exitcode', '--trust-base', 'main'], {
        env: { ...s.env, KMS_SYNC_ENV_ALLOW: 'STAGE', STAGE: 'blue' },
        cwd: full,
      });
      expect(local.code).toBe(2);
      expect(local.stdout).toContain(`store audit: new (${store})`);

      // A shallow clone of the pull request alone: the base cannot be read, and the plan says so
      // instead of trusting the edited record.
      const shallow = path.join(path.dirname(full), 'shallow');
      await git(
        path.dirname(full),
        'clone',
        '-q',
        '--depth=1',
        '--single-branch',
        '-b',
        'pr',
        `file://${s.dir}`,
        shallow,
      );
      const blind = await runCli(['plan', '-f', '.', '--detailed-exitcode'], { env: ciEnv, cwd: shallow });
      expect(blind.code, blind.stdout + blind.stderr).toBe(2);
      expect(blind.stdout).toContain('the records of the base origin/main cannot be read (this clone is shallow');
      expect(blind.stdout).toContain('git fetch --depth=1 origin main:refs/remotes/origin/main');
      expect(blind.stdout).toContain(`store audit: new (${store})`);
      expect(blind.stdout).toContain('reads the environment variable STAGE');
    },
    patient(90_000),
  );
});

/** SOPS's AES-256-GCM value (`ENC[AES256_GCM,data:…,iv:…,tag:…,type:…]`) opened with a data key, as any reader would. */
function openValue(enc: string, dataKey: Buffer, aad: string): string | undefined {
  const m = /^ENC\[AES256_GCM,data:([^,]*),iv:([^,]+),tag:([^,]+),type:\w+\]$/.exec(enc);
  if (!m) throw new Error(`not a SOPS value: ${enc.slice(0, 20)}`);
  try {
    const d = createDecipheriv('aes-256-gcm', dataKey, Buffer.from(m[2]!, 'base64'), { authTagLength: 16 });
    d.setAAD(Buffer.from(aad));
    d.setAuthTag(Buffer.from(m[3]!, 'base64'));
    return Buffer.concat([d.update(Buffer.from(m[1]!, 'base64')), d.final()]).toString('utf8');
  } catch {
    return undefined;
  }
}

/** The data key `keyFile` unwraps from the store file's age stanzas with Debian's `age`, if any. */
async function unwrapWithAge(storeText: string, keyFile: string): Promise<Buffer | undefined> {
  const stanzas = (parse(storeText) as { sops: { age: { enc: string }[] } }).sops.age.map((s) => s.enc);
  expect(stanzas.length).toBeGreaterThan(0);
  for (const armored of stanzas) {
    const key = await new Promise<Buffer | undefined>((resolve) => {
      const child = execFile('age', ['-d', '-i', keyFile], { encoding: 'buffer' }, (error, stdout) =>
        resolve(error ? undefined : stdout),
      );
      child.stdin!.end(armored);
    });
    if (key) return key;
  }
  return undefined;
}

const hasAge = await run('age', ['--version']).then(
  () => true,
  () => false,
);

describe("a recipient removed from a store's declaration", () => {
  it.skipIf(skipWhen(!hasAge, "Debian's age is not on PATH (apt-get install age)"))(
    'is a security change, and apply re-keys the store: the removed identity opens nothing in it',
    async () => {
      const dir = scratchDir();
      const friend = await identity(dir, 'friend');
      const declared = (recipients: string) =>
        withStores(
          `  - { name: main, default: true, uri: "sops:.kms-sync/secrets.sops.yaml", options: { recipients: [${recipients}] } }\n`,
          smallConfig,
        );
      const s = await setup({ 'kms-sync.yaml': declared(friend.recipient) });
      cleanup.push(
        () => s.emu.close(),
        () => rmSync(s.dir, { recursive: true, force: true }),
      );
      const cli = (args: string[]) => runCli(args, { env: s.env, cwd: s.dir });
      const applied = await cli(['apply', '-f', '.', '--auto-approve']);
      expect(applied.code, applied.stderr).toBe(0);
      const storePath = path.join(s.dir, '.kms-sync', 'secrets.sops.yaml');
      const sealedValue = (text: string) =>
        (parse(text) as { secrets: Record<string, { value: string }> }).secrets['shop-staging/web/main']!.value;
      const aad = 'secrets:shop-staging/web/main:value:';
      // While declared, the friend's identity unwraps the data key and opens the values.
      const before = readFileSync(storePath, 'utf8');
      const oldKey = await unwrapWithAge(before, friend.keyFile);
      expect(oldKey?.length).toBe(32);
      expect(openValue(sealedValue(before), oldKey!, aad)).toMatch(/\S{16,}/);

      writeFileSync(path.join(s.dir, 'kms-sync.yaml'), declared(''));
      const plan = await cli(['plan', '-f', '.', '--detailed-exitcode']);
      expect(plan.code, plan.stdout + plan.stderr).toBe(2);
      expect(plan.stdout).toContain(
        `store main: - recipient ${friend.recipient} (apply re-keys the store: a new data key, wrapped for the remaining recipients only; ` +
          'the removed recipient could read the 2 secret(s) issued before: rotate them with kms-sync rotate --key)',
      );
      const json = JSON.parse((await cli(['plan', '-f', '.', '--json'])).stdout);
      expect(json.security_changes).toContainEqual(
        expect.objectContaining({ kind: 'recipient_removed', store: 'main', value: friend.recipient, holds: 2 }),
      );

      const rekeyed = await cli(['apply', '-f', '.', '--auto-approve']);
      expect(rekeyed.code, rekeyed.stdout + rekeyed.stderr).toBe(0);
      const after = readFileSync(storePath, 'utf8');
      expect(after).not.toContain(friend.recipient);
      expect(await unwrapWithAge(after, friend.keyFile)).toBeUndefined();
      // The data key the friend unwrapped before opens no value of the re-keyed file.
      expect(openValue(sealedValue(after), oldKey!, aad)).toBeUndefined();
      // The local identity still reads every key, the same values as before.
      const reveal = await cli(['secrets', 'list', '-f', '.', '--reveal', 'shop-staging/web/main']);
      expect(reveal.code, reveal.stderr).toBe(0);
      expect(reveal.stdout).toContain(openValue(sealedValue(before), oldKey!, aad)!);
      // Settled: planning the same configuration again is no change, also in a pull request's CI job:
      // a folder in no git checkout keeps its own records when the base comes from the CI's variables,
      // and says it cannot read one named with --trust-base.
      const again = await runCli(['plan', '-f', '.', '--detailed-exitcode'], {
        env: { ...s.env, GITHUB_ACTIONS: 'true', GITHUB_BASE_REF: 'main' },
        cwd: s.dir,
      });
      expect(again.code, again.stdout + again.stderr).toBe(0);
      const named = await cli(['plan', '-f', '.', '--detailed-exitcode', '--trust-base', 'main']);
      expect(named.code, named.stdout + named.stderr).toBe(2);
      expect(named.stdout).toContain('the records of the base main cannot be read (');
    },
    patient(60_000),
  );
});

describe("a pull request cannot choose the file plan says a store's secrets were left in", () => {
  it(
    "plan in CI looks for a moved store's secrets in the base's record, not in the one the pull request edits",
    async () => {
      // main: applied into the default store file, its records committed.
      const config = `owner: shop-team\n${smallConfig}`;
      const s = await appliedOnMain(config);

      // The pull request moves the store to a new file (its secrets now "not held") and edits the
      // record so that the old store is a decoy file of its own, holding the same key ids.
      await git(s.dir, 'checkout', '-q', '-b', 'pr');
      writeFileSync(
        path.join(s.dir, 'kms-sync.yaml'),
        withStores('  - { name: main, default: true, uri: "sops:.kms-sync/secrets.new.sops.yaml" }\n', config),
      );
      writeFileSync(
        path.join(s.dir, '.kms-sync', 'decoy.sops.yaml'),
        readFileSync(path.join(s.dir, '.kms-sync', 'secrets.sops.yaml')),
      );
      const record = path.join(s.dir, '.kms-sync', 'trust.json');
      const edited = JSON.parse(readFileSync(record, 'utf8'));
      for (const set of [edited, ...Object.values<{ stores: Record<string, string> }>(edited.targets ?? {})])
        set.stores = { decoy: 'sops:.kms-sync/decoy.sops.yaml' };
      writeFileSync(record, JSON.stringify(edited));
      await git(s.dir, 'add', '-A');
      await git(s.dir, 'commit', '-q', '-m', 'pr: a new store file');

      const plan = await runCli(['plan', '-f', '.'], { env: { ...s.env, KMS_SYNC_TRUST_BASE: 'main' }, cwd: s.dir });
      expect(plan.code, plan.stdout + plan.stderr).toBe(0);
      expect(plan.stdout).toContain('.kms-sync/trust.json: edited by this change');
      expect(plan.stdout).toMatch(
        /Warning: 2 key\(s\) have their secret in \S+\/\.kms-sync\/secrets\.sops\.yaml, not in \S+secrets\.new\.sops\.yaml/,
      );
      expect(plan.stdout).toContain(
        `mv ${path.join('.kms-sync', 'secrets.sops.yaml')} ${path.join('.kms-sync', 'secrets.new.sops.yaml')}`,
      );
      expect(plan.stdout).not.toContain('decoy');
    },
    patient(90_000),
  );
});

describe('a pull request cannot plant a store file wrapped for its author', () => {
  it(
    'a store file the change commits (new, or replacing one) wrapped for another recipient is a security change of the plan',
    async () => {
      const config = `owner: shop-team\n${smallConfig}`;
      const s = await appliedOnMain(config);
      const evil = await identity(s.dir, 'attacker');
      // The author makes a store file with a data key of its own, wrapped for the operator's
      // recipient (public, in the store file on main) and for itself; it declares no recipient.
      const opRecipient = /recipient: (age1\S+)/.exec(
        readFileSync(path.join(s.dir, '.kms-sync', 'secrets.sops.yaml'), 'utf8'),
      )![1]!;
      const planted = new SopsFileStore(path.join(s.dir, '.kms-sync', 'audit.sops.yaml'), {
        env: { SOPS_AGE_KEY_FILE: evil.keyFile },
        recipients: [opRecipient],
      } as never);
      await planted.put('x-y/z/k', 'not-a-key', {
        projectEnv: 'x-y',
        client: 'z',
        key: 'k',
        keyId: 'k0',
        issuedAt: new Date().toISOString(),
      });
      const plantedText = readFileSync(path.join(s.dir, '.kms-sync', 'audit.sops.yaml'));
      await git(s.dir, 'checkout', '-q', '-b', 'pr');
      writeFileSync(
        path.join(s.dir, 'kms-sync.yaml'),
        withStores(
          '  - { name: audit, uri: "sops:.kms-sync/audit.sops.yaml" }\n',
          config.replace(
            'keys: [{ name: main }] }, { name: app',
            'keys: [{ name: main }, { name: extra, secret: { store: audit } }] }, { name: app',
          ),
        ),
      );
      await git(s.dir, 'add', '-A');
      await git(s.dir, 'commit', '-q', '-m', 'pr: an audit store');
      const ci = { ...s.env, KMS_SYNC_TRUST_BASE: 'main' };
      const line = `store audit: its file, edited by this change, is wrapped for ${evil.recipient}, which the base revision's file is not`;
      const plan = await runCli(['plan', '-f', '.', '--detailed-exitcode'], { env: ci, cwd: s.dir });
      expect(plan.code, plan.stdout + plan.stderr).toBe(2);
      expect(plan.stdout).toContain(line);
      // The operator's own recipient was in the base's default store file: the planted file's
      // stanza for it is new to this file, so both are named; the base's unchanged default store is not.
      expect(plan.stdout).not.toContain('store default: its file');
      const md = await runCli(['plan', '-f', '.', '--format', 'markdown'], { env: ci, cwd: s.dir });
      expect(md.stdout).toContain(evil.recipient);
      const json = JSON.parse((await runCli(['plan', '-f', '.', '--json'], { env: ci, cwd: s.dir })).stdout);
      expect(json.security_changes).toContainEqual(
        expect.objectContaining({ kind: 'recipient_in_edited_file', store: 'audit', value: evil.recipient, holds: 1 }),
      );
      // The same for the default store's file replaced by one of the author's.
      await git(s.dir, 'checkout', '-q', '-b', 'pr2', 'main');
      writeFileSync(path.join(s.dir, '.kms-sync', 'secrets.sops.yaml'), plantedText);
      await git(s.dir, 'commit', '-q', '-am', 'pr2: the store file replaced');
      const replaced = await runCli(['plan', '-f', '.'], { env: ci, cwd: s.dir });
      expect(replaced.stdout).toContain(
        `store default: its file, edited by this change, is wrapped for ${evil.recipient}, which the base revision's file is not`,
      );
      // Without a change to the file (the base itself), nothing is said.
      await git(s.dir, 'checkout', '-q', 'main');
      const base = await runCli(['plan', '-f', '.', '--detailed-exitcode'], { env: ci, cwd: s.dir });
      expect(base.code, base.stdout + base.stderr).toBe(0);
    },
    patient(90_000),
  );
});

describe('a pull request cannot write the key journal a plan acts on', () => {
  /** One plaintext orphan-record frame of the journal (secrets/journal.ts): "revoke these live keys". */
  function orphanFrame(o: { projectEnv: string; clientId: string; client: string; keyId: string; keyName: string }) {
    const id = `o-${randomUUID()}`;
    const body = JSON.stringify({
      id,
      createdAt: new Date().toISOString(),
      type: 'orphan',
      projectEnv: o.projectEnv,
      clientId: o.clientId,
      client: o.client,
      keyIds: [o.keyId],
      keyNames: [o.keyName],
    });
    const payload = Buffer.concat([Buffer.from([id.length]), Buffer.from(id, 'ascii'), Buffer.from(body)]);
    const head = Buffer.alloc(12);
    head.write('KSJ1', 0, 'ascii');
    head.writeUInt32BE(payload.length, 4);
    head.writeUInt32BE(crc32(payload), 8);
    return Buffer.concat([head, payload]);
  }

  it(
    'a journal the change commits (an orphan record naming a held key) is a security change, and the plan neither revokes nor removes it',
    async () => {
      const config = `owner: shop-team\n${smallConfig}`;
      const s = await appliedOnMain(config);
      const res = await fetch(`${s.emu.url}/client?project_env=shop-staging`, { headers: { 'x-api-key': TEST_KEY } });
      const web = ((await res.json()) as { data: { name: string; id: string; keys: { id: string }[] }[] }).data.find(
        (c) => c.name === 'web',
      )!;
      const keyId = web.keys[0]!.id;
      await git(s.dir, 'checkout', '-q', '-b', 'pr');
      const journal = path.join(s.dir, '.kms-sync', 'journal');
      writeFileSync(
        journal,
        orphanFrame({ projectEnv: 'shop-staging', clientId: web.id, client: 'web', keyId, keyName: 'main' }),
      );
      await git(s.dir, 'add', '-A');
      await git(s.dir, 'commit', '-q', '-m', 'pr: a journal');
      const ci = { ...s.env, KMS_SYNC_TRUST_BASE: 'main' };
      const plan = await runCli(['plan', '-f', '.', '--detailed-exitcode'], { env: ci, cwd: s.dir });
      expect(plan.code, plan.stdout + plan.stderr).toBe(2);
      expect(plan.stdout).toContain('.kms-sync/journal: the key journal, edited by this change');
      expect(plan.stdout + plan.stderr).toContain('is not the base revision');
      expect(plan.stdout).not.toContain('will be destroyed');
      expect(plan.stdout).toContain('0 to rotate, 0 to delete');
      expect(readFileSync(journal)).toHaveLength(
        orphanFrame({ projectEnv: 'shop-staging', clientId: web.id, client: 'web', keyId, keyName: 'main' }).length,
      );
      // Without the trust base (the checkout's own journal, as apply of the default branch reads it), it is acted on.
      const local = await runCli(['plan', '-f', '.'], { env: s.env, cwd: s.dir });
      expect(local.stdout).toContain('will be destroyed (orphan');
    },
    patient(90_000),
  );
});
