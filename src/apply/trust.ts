// Changes with security weight (plan/types.ts SecurityChange): found by comparing the
// configuration with what the store files hold now (their recipients) and with the trust record
// the last apply left beside the owner record (`.kms-sync/trust.json`: the stores, their URIs and
// options, the `${env:}` names, the owner). Per declaration, never per resource: a store's file is
// read only when its declaration names recipients.
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import type { DesiredState, OperatorPolicy, StoreDeclaration } from '../model/index.js';
import { POLICY_HOW, readOwnerRecord } from '../model/index.js';
import { serviceTarget } from '../model/target.js';
import { redactUserinfo } from '../model/redact.js';
import { describeSecurityChange, recipientsAddedToHeldKeys, type Plan, type SecurityChange } from '../plan/types.js';
import { DEFAULT_STORE_URI, type StoreRegistry } from '../secrets/registry.js';
import { declaredRecipients } from '../secrets/store-policy.js';

export const TRUST_RECORD = path.join('.kms-sync', 'trust.json');

interface TrustedSet {
  /** By store name: its URI and options, as shown (without credentials). */
  stores: Record<string, string>;
  env: string[];
}

interface TrustRecord extends TrustedSet {
  version: 1;
  /**
   * By service target (model/target.ts): one folder applied to several services (a store file per
   * service, `${env:KMS_STAGE}` in its URI) trusts each service's stores on their own, so switching
   * services is not a store change. The top level is the last apply's, for records without it.
   */
  targets?: Record<string, TrustedSet>;
}

/** What was trusted for this target (the last apply's when the target has no entry of its own). */
const trustedFor = (record: TrustRecord | undefined, target: string | undefined): TrustedSet | undefined =>
  (target !== undefined ? record?.targets?.[target] : undefined) ?? record;

/** A store as compared and shown: its URI without user info, and its options (recipients sorted). */
export function storeFingerprint(d: Pick<StoreDeclaration, 'uri' | 'options'>): string {
  const options = d.options ? Object.fromEntries(Object.entries(d.options).sort(([a], [b]) => (a < b ? -1 : 1))) : undefined;
  if (options && Array.isArray(options.recipients)) options.recipients = [...declaredRecipients(d.options)].sort();
  return redactUserinfo(d.uri) + (options && Object.keys(options).length ? ` ${JSON.stringify(options)}` : '');
}

async function readTrustRecord(dir: string): Promise<TrustRecord | undefined> {
  try {
    const parsed = JSON.parse(await readFile(path.join(dir, TRUST_RECORD), 'utf8')) as TrustRecord;
    if (parsed?.version !== 1 || typeof parsed.stores !== 'object' || !Array.isArray(parsed.env)) return undefined;
    return parsed;
  } catch {
    return undefined;
  }
}

/**
 * Store files this configuration's keys may have gone to before, other than its stores now: the
 * trust record's (the stores of the last apply) and the default file. Where `plan` looks for a
 * secret missing from its store (secrets/presence.ts), to say that it stayed behind in the old file.
 */
export async function previousStoreFiles(dir: string, current: readonly string[]): Promise<string[]> {
  const record = await readTrustRecord(dir);
  // A fingerprint is the URI, then its options after a space (storeFingerprint).
  const sets = [record, ...Object.values(record?.targets ?? {})];
  const uris = [...sets.flatMap((t) => Object.values(t?.stores ?? {})).map((fp) => fp.split(' ')[0]!), DEFAULT_STORE_URI];
  return [...new Set(uris)].filter((u) => /^sops:/.test(u) && !current.includes(u));
}

/** After an apply: what the configuration's stores and `${env:}` reads were (atomically, 0644 like the owner record). */
export async function writeTrustRecord(dir: string, desired: Pick<DesiredState, 'stores' | 'envReferences'>, target?: string): Promise<void> {
  const trusted: TrustedSet = {
    stores: Object.fromEntries(desired.stores.map((s) => [s.name, storeFingerprint(s)])),
    env: [...(desired.envReferences ?? [])].sort(),
  };
  const before = await readTrustRecord(dir);
  const targets = { ...before?.targets, ...(target !== undefined ? { [target]: trusted } : {}) };
  const record: TrustRecord = { version: 1, ...trusted, ...(Object.keys(targets).length ? { targets } : {}) };
  const file = path.join(dir, TRUST_RECORD);
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  const tmp = `${file}.${process.pid}-${randomBytes(6).toString('hex')}.tmp`;
  await writeFile(tmp, `${JSON.stringify(record, null, 1)}\n`, { mode: 0o644, flag: 'wx' });
  await rename(tmp, file);
}

/**
 * The security changes of a configuration: stores new or changed since the last apply, recipients
 * a store file lacks (with how many secrets it holds), `${env:}` reads not recorded, and an owner
 * other than the recorded one. `dir` holds the records (the configuration folder, the agent's
 * STATE/store).
 */
export async function securityChanges(registry: StoreRegistry, desired: Pick<DesiredState, 'stores' | 'envReferences'>, owner: string, dir: string, target?: string): Promise<SecurityChange[]> {
  const out: SecurityChange[] = [];
  const record = trustedFor(await readTrustRecord(dir), target);
  for (const s of desired.stores) {
    const now = storeFingerprint(s);
    const before = record?.stores[s.name];
    if (before === undefined) out.push({ kind: 'store_added', store: s.name, value: now });
    else if (before !== now) out.push({ kind: 'store_changed', store: s.name, value: now, before });
  }
  for (const s of desired.stores) {
    const wanted = declaredRecipients(s.options);
    if (wanted.length === 0) continue;
    const store = await registry.get(s.name).catch(() => undefined); // a refused or malformed store is reported by its own check
    const file = store as { fileRecipients?: () => Promise<{ recipients: string[]; secrets: number }> } | undefined;
    if (!file?.fileRecipients) continue;
    const held = await file.fileRecipients().catch(() => undefined);
    // No file yet: it is made for its declared recipients, which store_added / store_changed show.
    if (!held || (held.recipients.length === 0 && held.secrets === 0)) continue;
    for (const r of [...new Set(wanted)].sort()) {
      if (!held.recipients.includes(r)) out.push({ kind: 'recipient_added', store: s.name, value: r, holds: held.secrets });
    }
  }
  const recordedEnv = new Set(record?.env ?? []);
  for (const name of desired.envReferences ?? []) if (!recordedEnv.has(name)) out.push({ kind: 'env_read', value: name });
  const recordedOwner = await readOwnerRecord(dir);
  if (recordedOwner !== undefined && recordedOwner !== owner) out.push({ kind: 'owner_changed', value: owner, before: recordedOwner });
  return out;
}

/**
 * Why apply refuses a plan: it adds recipients to secret stores that already hold keys, which
 * could then decrypt every key issued before, and the operator did not allow it. Undefined: allowed.
 */
export function newRecipientRefusal(plan: Plan, policy: Pick<OperatorPolicy, 'allowNewRecipients'>): string | undefined {
  const widening = recipientsAddedToHeldKeys(plan);
  if (widening.length === 0 || policy.allowNewRecipients) return undefined;
  return `refusing to apply: the plan adds recipients to secret stores that already hold keys, and each could decrypt them:\n` +
    widening.map((c) => `  - ${describeSecurityChange(c)}`).join('\n') +
    `\nNothing was changed. Review who holds these recipients, then allow it with ${POLICY_HOW.allowNewRecipients}`;
}

/** After an apply: the recipients it allowed are added to their store files, and the trust record is written. */
export async function settleSecurityChanges(registry: StoreRegistry, plan: Plan, dir: string): Promise<void> {
  await addAllowedRecipients(registry, plan.security ?? []);
  await writeTrustRecord(dir, { stores: plan.stores, ...(plan.envReferences ? { envReferences: plan.envReferences } : {}) }, serviceTarget(plan.target.url, plan.target.credential));
}

/** Wraps each sops store's data key for the declared recipients it lacks (apply, once allowed). */
export async function addAllowedRecipients(registry: StoreRegistry, changes: readonly SecurityChange[]): Promise<void> {
  const stores = new Set(changes.filter((c) => c.kind === 'recipient_added').map((c) => c.store!));
  for (const name of stores) {
    const store = (await registry.get(name)) as { addMissingRecipients?: () => Promise<string[]> };
    await store.addMissingRecipients?.();
  }
}
