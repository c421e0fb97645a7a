// Changes with security weight (plan/types.ts SecurityChange): found by comparing the
// configuration with what the store files hold now (their recipients) and with the trust record
// the last apply left beside the owner record (`.kms-sync/trust.json`: the stores, their URIs and
// options, the `${env:}` names, the owner). Per declaration, never per resource: a store's file is
// read only when its declaration names recipients.
//
// The records sit in the checkout, so a pull request can edit them. A plan of a pull request
// (`--trust-base REF`, by default the CI's base branch) therefore compares with the records of the
// base revision, read from git, which the pull request cannot change, and shows an edit of the
// records as a change of its own; when the base cannot be read it says so and compares with
// nothing, never with the checkout's records.
import { execFile } from 'node:child_process';
import { mkdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { DesiredState, OperatorPolicy, StoreDeclaration } from '../model/index.js';
import { OWNER_RECORD, POLICY_HOW, readOwnerRecord } from '../model/index.js';
import { serviceTarget } from '../model/target.js';
import { redactUserinfo } from '../model/redact.js';
import { describeSecurityChange, recipientsAddedToHeldKeys, type Plan, type SecurityChange } from '../plan/types.js';
import { DEFAULT_STORE_URI, type StoreRegistry } from '../secrets/registry.js';
import { declaredRecipients } from '../secrets/store-policy.js';
import { atomicWriteFile } from '../secrets/fsutil.js';

export const TRUST_RECORD = path.join('.kms-sync', 'trust.json');
/** The key journal of a configuration folder (secrets/journal.ts), committed by CI when a store write failed. */
const JOURNAL_RECORD = path.join('.kms-sync', 'journal');

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
  const options = d.options
    ? Object.fromEntries(Object.entries(d.options).sort(([a], [b]) => (a < b ? -1 : 1)))
    : undefined;
  if (options && Array.isArray(options.recipients)) options.recipients = [...declaredRecipients(d.options)].sort();
  return redactUserinfo(d.uri) + (options && Object.keys(options).length ? ` ${JSON.stringify(options)}` : '');
}

function parseTrustRecord(text: string | undefined): TrustRecord | undefined {
  if (text === undefined) return undefined;
  try {
    const parsed = JSON.parse(text) as TrustRecord;
    if (
      parsed?.version !== 1 ||
      typeof parsed.stores !== 'object' ||
      parsed.stores === null ||
      !Array.isArray(parsed.env)
    )
      return undefined;
    return parsed;
  } catch {
    return undefined;
  }
}

/**
 * Store files this configuration's keys may have gone to before, other than its stores now: the
 * trust record's (the stores of the last apply) and the default file. Where `plan` looks for a
 * secret missing from its store (secrets/presence.ts), to say that it stayed behind in the old file
 * and which file to move. The record is the one the security changes compare with: with a trust
 * base, the base revision's, since the checkout's is the pull request's and a file named there
 * would choose what plan tells the operator to move (files are still opened under the operator's
 * store policy, and only `sops:` ones).
 */
export async function previousStoreFiles(
  dir: string,
  current: readonly string[],
  trustBase?: TrustBase,
): Promise<string[]> {
  const record = (await baseline(dir, trustBase)).trust;
  // A fingerprint is the URI, then its options after a space (storeFingerprint).
  const sets = [record, ...Object.values(record?.targets ?? {})];
  const uris = [
    ...sets.flatMap((t) => Object.values(t?.stores ?? {})).map((fp) => fp.split(' ')[0]!),
    DEFAULT_STORE_URI,
  ];
  return [...new Set(uris)].filter((u) => /^sops:/.test(u) && !current.includes(u));
}

async function readTrustRecord(dir: string): Promise<TrustRecord | undefined> {
  return parseTrustRecord(await readFile(path.join(dir, TRUST_RECORD), 'utf8').catch(() => undefined));
}

function parseOwnerRecord(text: string | undefined): string | undefined {
  const owner = text?.trim();
  return owner && !/[\u0000-\u001f\u007f]/.test(owner) ? owner : undefined;
}

/** The recipients a record's store fingerprint declared (storeFingerprint's options, recipients sorted). */
function recordedRecipients(fingerprint: string | undefined): string[] {
  const at = fingerprint?.indexOf(' {') ?? -1;
  if (at < 0) return [];
  try {
    return declaredRecipients((JSON.parse(fingerprint!.slice(at + 1)) as StoreDeclaration['options']) ?? {});
  } catch {
    return [];
  }
}

/**
 * The git revision whose records the security changes are compared with (`--trust-base`). `ci`:
 * taken from the CI's variables, not named by the operator: a configuration folder outside any git
 * checkout (a test's, a generated one) then keeps its own records.
 */
export interface TrustBase {
  ref: string;
  ci?: boolean;
}

/** The CI's base revision of a pull request or merge request, when the job is one (the default of `--trust-base`). */
export function trustBaseFromEnvironment(env: NodeJS.ProcessEnv): TrustBase | undefined {
  const pick = (v: string | undefined) => (v?.trim() ? v.trim() : undefined);
  const explicit = pick(env.KMS_SYNC_TRUST_BASE);
  if (explicit) return { ref: explicit };
  if (env.GITHUB_ACTIONS === 'true' && pick(env.GITHUB_BASE_REF))
    return { ref: `origin/${pick(env.GITHUB_BASE_REF)}`, ci: true };
  if (env.GITLAB_CI === 'true') {
    const sha = pick(env.CI_MERGE_REQUEST_DIFF_BASE_SHA);
    if (sha) return { ref: sha, ci: true };
    const branch = pick(env.CI_MERGE_REQUEST_TARGET_BRANCH_NAME);
    if (branch) return { ref: `origin/${branch}`, ci: true };
  }
  return undefined;
}

/** One git command in `dir`: its exit status and output (bytes), never thrown. */
function git(dir: string, args: string[]): Promise<{ ok: boolean; stdout: Buffer; missing: boolean }> {
  return new Promise((resolve) => {
    execFile(
      'git',
      ['-C', dir, ...args],
      { encoding: 'buffer', timeout: 30_000, maxBuffer: 4 << 20 },
      (error, stdout) => {
        resolve({
          ok: !error,
          stdout: stdout ?? Buffer.alloc(0),
          missing: (error as NodeJS.ErrnoException | null)?.code === 'ENOENT',
        });
      },
    );
  });
}

/** What the security changes are compared with: the records, and the changes that say where they came from. */
interface Baseline {
  trust: TrustRecord | undefined;
  owner: string | undefined;
  changes: SecurityChange[];
  /** `REF (commit)`, when the records are a git revision's. */
  base?: string;
  /** A file of the configuration folder at that revision (a path relative to it), undefined when it has none. */
  atBase?: (file: string) => Promise<string | undefined>;
}

/** The commit of a trust base in `dir`'s checkout; else why it cannot be read, or `outside` (a CI base of a folder in no checkout). */
async function baseCommit(
  dir: string,
  { ref, ci }: TrustBase,
): Promise<{ commit: string } | { why: string } | 'outside'> {
  const candidates =
    ref.startsWith('origin/') || ref.startsWith('refs/') || /^[0-9a-f]{40}$/i.test(ref)
      ? [ref]
      : [ref, `origin/${ref}`];
  let commit: string | undefined;
  for (const c of candidates) {
    if (c.startsWith('-')) break; // never an option of git's
    const r = await git(dir, ['rev-parse', '--verify', '--quiet', '--end-of-options', `${c}^{commit}`]);
    if (r.ok) {
      commit = r.stdout.toString('utf8').trim();
      break;
    }
  }
  if (commit) return { commit };
  const inside = await git(dir, ['rev-parse', '--is-inside-work-tree']);
  if (inside.missing) return { why: 'git is not installed here' };
  // A pull request cannot take the folder out of its checkout (git tracks no .git path).
  if (!inside.ok && ci) return 'outside';
  if (!inside.ok) return { why: `${path.basename(dir) || dir} is not in a git checkout` };
  const shallow = (await git(dir, ['rev-parse', '--is-shallow-repository'])).stdout.toString('utf8').trim() === 'true';
  const branch = ref.replace(/^origin\//, '');
  return {
    why: `${shallow ? 'this clone is shallow and does not hold it' : 'no such revision in this clone'}: fetch it first, e.g. git fetch --depth=1 origin ${branch}:refs/remotes/origin/${branch}`,
  };
}

/** A file of `dir` (a path relative to it) at `commit`, as bytes; undefined when the commit has none. */
async function blobAt(dir: string, commit: string, file: string): Promise<Buffer | undefined> {
  const r = await git(dir, ['cat-file', 'blob', `${commit}:./${file.split(path.sep).join('/')}`]);
  return r.ok ? r.stdout : undefined;
}

/** Whether `dir`'s file differs from the base revision's (byte for byte; both absent: no); undefined when the base cannot be read. */
async function editedSince(dir: string, commit: string, file: string): Promise<boolean> {
  const [before, now] = await Promise.all([
    blobAt(dir, commit, file),
    readFile(path.join(dir, file)).catch(() => undefined),
  ]);
  return before === undefined || now === undefined ? before !== now : !before.equals(now);
}

/**
 * Whether the key journal of `dir` may be acted on by a plan against `trustBase` (a pull
 * request's): only when it is the base revision's, byte for byte (or there is none). A journal
 * the change edits or adds (plaintext orphan records revoke live keys, data frames are written into
 * the stores) is the change's, not a record of an interrupted run: false, and then also when the
 * base cannot be read. Without a trust base (apply of the default branch, the agent): true.
 */
export async function journalIsTheBases(dir: string, trustBase: TrustBase | undefined): Promise<boolean> {
  if (trustBase === undefined) return true;
  const base = await baseCommit(dir, trustBase);
  if (base === 'outside') return true;
  return 'commit' in base && !(await editedSince(dir, base.commit, JOURNAL_RECORD));
}

/** The records of `dir` at git revision `ref` (tried as given, then as `origin/REF`), and the edits of the checkout's records. */
async function baselineAt(dir: string, trustBase: TrustBase): Promise<Baseline> {
  const { ref } = trustBase;
  const base = await baseCommit(dir, trustBase);
  if (base === 'outside') return checkoutBaseline(dir);
  if (!('commit' in base))
    return {
      trust: undefined,
      owner: undefined,
      changes: [{ kind: 'trust_base_unreadable', value: ref, detail: base.why }],
    };
  const { commit } = base;
  const at = async (file: string): Promise<string | undefined> => (await blobAt(dir, commit, file))?.toString('utf8');
  const [baseTrust, baseOwner] = await Promise.all([at(TRUST_RECORD), at(OWNER_RECORD)]);
  const changes: SecurityChange[] = [];
  // The journal too: what an interrupted run left (keys to store, keys to revoke) is never a change's to write.
  for (const file of [TRUST_RECORD, OWNER_RECORD, JOURNAL_RECORD]) {
    if (await editedSince(dir, commit, file))
      changes.push({ kind: 'record_edited', value: file.split(path.sep).join('/') });
  }
  return {
    trust: parseTrustRecord(baseTrust),
    owner: parseOwnerRecord(baseOwner),
    changes,
    base: `${ref} (${commit.slice(0, 12)})`,
    atBase: at,
  };
}

/** The records the security changes are compared with: the checkout's (the last apply's), or those of the git revision `trustBase`. */
async function baseline(dir: string, trustBase: TrustBase | undefined): Promise<Baseline> {
  return trustBase !== undefined ? baselineAt(dir, trustBase) : checkoutBaseline(dir);
}

async function checkoutBaseline(dir: string): Promise<Baseline> {
  return { trust: await readTrustRecord(dir), owner: await readOwnerRecord(dir), changes: [] };
}

/** After an apply: what the configuration's stores and `${env:}` reads were (atomically, 0644 like the owner record). */
export async function writeTrustRecord(
  dir: string,
  desired: Pick<DesiredState, 'stores' | 'envReferences'>,
  target?: string,
): Promise<void> {
  const trusted: TrustedSet = {
    stores: Object.fromEntries(desired.stores.map((s) => [s.name, storeFingerprint(s)])),
    env: [...(desired.envReferences ?? [])].sort(),
  };
  const before = await readTrustRecord(dir);
  const targets = { ...before?.targets, ...(target !== undefined ? { [target]: trusted } : {}) };
  const record: TrustRecord = { version: 1, ...trusted, ...(Object.keys(targets).length ? { targets } : {}) };
  const file = path.join(dir, TRUST_RECORD);
  await mkdir(path.dirname(file), { recursive: true, mode: 0o700 });
  // A full disk fails it naming the file and leaves no empty temp file (atomicWriteFile).
  await atomicWriteFile(file, `${JSON.stringify(record, null, 1)}\n`, 0o644);
}

/**
 * The security changes of a configuration: stores new or changed since the last apply, recipients
 * a store file lacks (with how many secrets it holds) or holds though its declaration dropped them,
 * `${env:}` reads not recorded, and an owner other than the recorded one. `dir` holds the records
 * (the configuration folder, the agent's STATE/store); `trustBase`, a git revision whose records
 * are compared with instead (a pull request's base: the checkout's records are the pull request's).
 * The second result is the base, as `REF (commit)`, when one was read.
 */
export async function securityChanges(
  registry: StoreRegistry,
  desired: Pick<DesiredState, 'stores' | 'envReferences'>,
  owner: string,
  dir: string,
  target?: string,
  trustBase?: TrustBase,
): Promise<{ changes: SecurityChange[]; base?: string }> {
  const from = await baseline(dir, trustBase);
  const out: SecurityChange[] = [...from.changes];
  const record = trustedFor(from.trust, target);
  for (const s of desired.stores) {
    const now = storeFingerprint(s);
    const before = record?.stores[s.name];
    const recipients = [...declaredRecipients(s.options)].sort();
    if (before === undefined) out.push({ kind: 'store_added', store: s.name, value: now, recipients });
    else if (before !== now) out.push({ kind: 'store_changed', store: s.name, value: now, before, recipients });
  }
  for (const s of desired.stores) {
    const wanted = declaredRecipients(s.options);
    // Recipients the last apply's declaration of this store named and this one does not.
    const dropped = recordedRecipients(record?.stores[s.name]).filter((r) => !wanted.includes(r));
    if (wanted.length === 0 && dropped.length === 0) continue;
    const store = await registry.get(s.name).catch(() => undefined); // a refused or malformed store is reported by its own check
    const file = store as { fileRecipients?: () => Promise<{ recipients: string[]; secrets: number }> } | undefined;
    if (!file?.fileRecipients) continue;
    const held = await file.fileRecipients().catch(() => undefined);
    // No file yet: it is made for its declared recipients, which store_added / store_changed show.
    if (!held || (held.recipients.length === 0 && held.secrets === 0)) continue;
    for (const r of [...new Set(wanted)].sort()) {
      if (!held.recipients.includes(r))
        out.push({ kind: 'recipient_added', store: s.name, value: r, holds: held.secrets });
    }
    // Still wrapped for it: apply re-keys the file (the old data key opens what it holds now).
    for (const r of [...new Set(dropped)].sort()) {
      if (held.recipients.includes(r))
        out.push({ kind: 'recipient_removed', store: s.name, value: r, holds: held.secrets });
    }
  }
  if (from.atBase) out.push(...(await recipientsInEditedFiles(registry, desired.stores, dir, from.atBase)));
  const recordedEnv = new Set(record?.env ?? []);
  for (const name of desired.envReferences ?? [])
    if (!recordedEnv.has(name)) out.push({ kind: 'env_read', value: name });
  if (from.owner !== undefined && from.owner !== owner)
    out.push({ kind: 'owner_changed', value: owner, before: from.owner });
  return { changes: out, ...(from.base ? { base: from.base } : {}) };
}

/**
 * Store files of the configuration folder that this change edits (a pull request's checkout,
 * compared with the base revision's files): a recipient a file's stanzas gained could decrypt every
 * secret written there. Its data key is the one the file's author chose, so a pull request that
 * commits (or replaces) a store file wrapped for its author, and declares nothing, would otherwise
 * receive the keys issued after the merge unseen: recipients are compared with the base's file,
 * not with the declarations (which the same change writes). Store files are written by apply.
 */
async function recipientsInEditedFiles(
  registry: StoreRegistry,
  stores: DesiredState['stores'],
  dir: string,
  atBase: (file: string) => Promise<string | undefined>,
): Promise<SecurityChange[]> {
  const out: SecurityChange[] = [];
  const seen = new Set<string>();
  // The default store too when no declaration names it (its file is the one most likely replaced).
  const named = [
    ...stores.map((s) => ({ name: s.name as string | undefined, uri: s.uri })),
    { name: undefined, uri: registry.uriOf(undefined) },
  ];
  for (const s of named) {
    if (!/^(sops|file):/i.test(s.uri)) continue;
    const store = (await registry.get(s.name).catch(() => undefined)) as
      | {
          path?: string;
          fileRecipients?: () => Promise<{ recipients: string[]; secrets: number }>;
          recipientsIn?: (text: string) => string[] | undefined;
        }
      | undefined;
    if (!store?.path || !store.fileRecipients || !store.recipientsIn || seen.has(store.path)) continue;
    seen.add(store.path);
    const rel = path.relative(dir, store.path);
    if (rel.startsWith('..') || path.isAbsolute(rel)) continue; // not in the checkout: no change edits it
    const held = await store.fileRecipients().catch(() => undefined);
    if (!held?.recipients.length) continue;
    const text = await atBase(rel);
    const before = (text === undefined ? [] : store.recipientsIn(text)) ?? [];
    for (const r of [...new Set(held.recipients)].sort())
      if (!before.includes(r))
        out.push({ kind: 'recipient_in_edited_file', store: s.name ?? 'default', value: r, holds: held.secrets });
  }
  return out;
}

/**
 * Why apply refuses a plan: it adds recipients to secret stores that already hold keys, which
 * could then decrypt every key issued before, and the operator did not allow it. Undefined: allowed.
 */
export function newRecipientRefusal(
  plan: Plan,
  policy: Pick<OperatorPolicy, 'allowNewRecipients'>,
): string | undefined {
  const widening = recipientsAddedToHeldKeys(plan);
  if (widening.length === 0 || policy.allowNewRecipients) return undefined;
  return (
    `refusing to apply: the plan adds recipients to secret stores that already hold keys, and each could decrypt them:\n` +
    widening.map((c) => `  - ${describeSecurityChange(c)}`).join('\n') +
    `\nNothing was changed. Review who holds these recipients, then allow it with ${POLICY_HOW.allowNewRecipients}`
  );
}

/**
 * After an apply: stores whose declaration dropped recipients are re-keyed, the recipients it
 * allowed are added to their store files, and the trust record is written (last: a run stopped
 * before it finds the same changes again).
 */
export async function settleSecurityChanges(registry: StoreRegistry, plan: Plan, dir: string): Promise<void> {
  await rekeyForRemovedRecipients(registry, plan.security ?? []);
  await addAllowedRecipients(registry, plan.security ?? []);
  await writeTrustRecord(
    dir,
    { stores: plan.stores, ...(plan.envReferences ? { envReferences: plan.envReferences } : {}) },
    serviceTarget(plan.target.url, plan.target.credential),
  );
}

/** A new data key for each sops store whose declaration dropped recipients, wrapped for the others only. */
export async function rekeyForRemovedRecipients(
  registry: StoreRegistry,
  changes: readonly SecurityChange[],
): Promise<void> {
  const removed = new Map<string, string[]>();
  for (const c of changes)
    if (c.kind === 'recipient_removed') removed.set(c.store!, [...(removed.get(c.store!) ?? []), c.value]);
  for (const [name, recipients] of removed) {
    const store = (await registry.get(name)) as { rekeyWithout?: (r: readonly string[]) => Promise<string[]> };
    await store.rekeyWithout?.(recipients);
  }
}

/** Wraps each sops store's data key for the declared recipients it lacks (apply, once allowed). */
export async function addAllowedRecipients(registry: StoreRegistry, changes: readonly SecurityChange[]): Promise<void> {
  const stores = new Set(changes.filter((c) => c.kind === 'recipient_added').map((c) => c.store!));
  for (const name of stores) {
    const store = (await registry.get(name)) as { addMissingRecipients?: () => Promise<string[]> };
    await store.addMissingRecipients?.();
  }
}
