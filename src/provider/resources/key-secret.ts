// kms_key_secret, an ephemeral resource (Terraform >= 1.10): the raw value of a key kms-sync
// issued, read back from the secret store it was written to, for Terraform to hand to a
// write-only argument or a provider block. Terraform keeps what an ephemeral resource returns out
// of plans and state; this file makes sure what it returns is the key asked for and a live one:
// a secret holding a revoked, expired or other key (a store written by another run, a rotation
// half done) is refused, never delivered.
import { defaultSecretName } from '../../model/index.js';
import { DiagnosticError } from '../diagnostics.js';
import type { Engine } from '../engine.js';
import type { TfObject } from '../values/types.js';
import { clientOf } from './key.js';
import { KEY_PREFIX_LENGTH } from './state.js';
import { check, known, matches, PROJECT_ENV, str, type EphemeralResourceType } from './types.js';

const ADDRESS = ['project_env', 'client', 'name'] as const;

/** The store a key names: secret_store left out, or "default", is the default store. */
async function storeOf(e: Engine, name: string | undefined) {
  if (name !== undefined && !e.config.stores.some((s) => s.name === name)) {
    throw new DiagnosticError(
      'Unknown secret store',
      `no secret_store block named "${name}" in the provider configuration (declared: ${e.config.stores.map((s) => s.name).join(', ') || 'none; keys go to the default store'})`,
      ['secret_store'],
    );
  }
  const { stores } = await e.keyPath();
  return stores.get(name);
}

export const keySecret: EphemeralResourceType = {
  typeName: 'kms_key_secret',

  validate(c, d) {
    check(d, c, 'project_env', 'Invalid project_env', matches(PROJECT_ENV, '<project>-<type>, e.g. acme-production'));
    check(
      d,
      c,
      'secret_store',
      'Invalid secret_store',
      matches(/^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/, 'the name of a secret_store block of the provider'),
    );
    // Unknown values count as given: Terraform opens the resource only once they are known.
    const given = (a: string) => c[a] !== null && c[a] !== undefined;
    const address = ADDRESS.filter(given);
    if (address.length > 0 && address.length < ADDRESS.length && !given('secret_name') && !given('key_id')) {
      d.error(
        'Incomplete key address',
        `set all of project_env, client and name (the key's address, as on its kms_key), or secret_name; missing: ${ADDRESS.filter((a) => !given(a)).join(', ')}`,
        [ADDRESS.find((a) => !given(a))!],
      );
    }
    if (!given('key_id') && !given('secret_name') && address.length === 0) {
      d.error(
        'Which key?',
        "set key_id = kms_key.<name>.key_id (recommended: Terraform then opens the secret only once the key exists), or the key's project_env, client and name, or its secret_name",
      );
    }
  },

  async open(e, c) {
    const want = { keyId: str(c.key_id), projectEnv: str(c.project_env), client: str(c.client), name: str(c.name) };
    const storeName = str(c.secret_store) === 'default' ? undefined : str(c.secret_store);
    // A key journaled by a killed run is a stored key (DESIGN.md "Keys" 0): flushed before reading,
    // whether the key is named by its address or by its id alone.
    if (want.projectEnv) await e.recoverForRead(want.projectEnv);
    else await e.recoverJournaledForRead();
    const store = await storeOf(e, storeName);
    if (!store.read || !store.list) {
      throw new DiagnosticError(
        'Store cannot be read back',
        `${store.displayUri} (${store.kind}) does not give values back, so kms_key_secret cannot open a key written there. ` +
          'Deliver the key from a store that reads back (the SOPS file, Vault, a cloud secret manager, Kubernetes, GitLab), or read it where that store delivers it.',
        ['secret_store'],
      );
    }
    const listing = await store.list();
    const logical =
      str(c.secret_name) ??
      (want.projectEnv && want.client && want.name
        ? defaultSecretName(want.projectEnv, want.client, want.name)
        : undefined);
    const entry =
      logical !== undefined
        ? listing.find((l) => l.name === store.secretName(logical))
        : listing.find((l) => l.meta?.keyId === want.keyId);
    const where = logical !== undefined ? `secret ${logical} of ${store.displayUri}` : `${store.displayUri}`;
    if (!entry) {
      throw new DiagnosticError(
        'Key secret not found',
        logical !== undefined
          ? `${store.displayUri} holds no secret ${logical}: the key was not issued yet, was written to another store (secret_store) or name (secret_name), or its secret was removed`
          : `no secret of ${store.displayUri} holds key ${want.keyId}: name the store (secret_store) the key was written to, or give the key's project_env, client and name`,
        [logical !== undefined ? (c.secret_name !== null ? 'secret_name' : 'name') : 'key_id'],
      );
    }
    const held = entry.meta?.keyId;
    if (!held) {
      throw new DiagnosticError(
        'Key secret without a key id',
        `${where} records no key id, so terraform-provider-kms cannot tell which key it holds, nor whether that key is live; rotate the key (a new one is recorded), or read the store by hand`,
      );
    }
    if (want.keyId && held !== want.keyId) {
      throw new DiagnosticError(
        'Secret holds another key',
        `${where} holds key ${held}, not ${want.keyId}: a replacement not yet recorded by Terraform, or a store another configuration writes. Run terraform apply (or refresh) so that both agree.`,
        ['key_id'],
      );
    }
    const projectEnv = want.projectEnv ?? entry.meta?.projectEnv;
    const clientName = want.client ?? entry.meta?.client;
    const name = want.name ?? entry.meta?.key;
    if (!projectEnv || !clientName || !name) {
      throw new DiagnosticError(
        'Key secret without its address',
        `${where} does not record the key's environment, client and name: give project_env, client and name`,
      );
    }
    // The key must be live in this service: a revoked or expired key is never delivered.
    const live = await clientOf(e, projectEnv, clientName);
    const k = live?.keys?.find((x) => x.id === held);
    if (!live || !k || k.name !== name) {
      throw new DiagnosticError(
        'Key not live',
        `${where} holds key ${held}, which is not a live key named ${name} of client ${clientName} in ${projectEnv} of this service (revoked, replaced, or issued by another service): nothing delivered. ` +
          'Apply the kms_key first; `kms-sync secrets list` shows what the store holds.',
      );
    }
    if (k.expiresAt && Date.parse(k.expiresAt) <= Date.now()) {
      throw new DiagnosticError(
        'Key expired',
        `key ${held} (${projectEnv}/${clientName}/${name}) expired at ${k.expiresAt}: nothing delivered. Rotate it (terraform apply -replace on its kms_key).`,
      );
    }
    const value = await store.read(entry.name);
    if (value === undefined)
      throw new DiagnosticError(
        'Key secret not found',
        `${where} was listed but could not be read (removed meanwhile?)`,
      );
    const result: TfObject = {
      project_env: projectEnv,
      client: clientName,
      name,
      key_id: held,
      secret_store: c.secret_store ?? null,
      secret_name: known(c.secret_name) ? c.secret_name : (logical ?? entry.name),
      value,
      key_prefix: value.slice(0, KEY_PREFIX_LENGTH),
      expires_at: k.expiresAt ?? null,
    };
    return result;
  },
};
