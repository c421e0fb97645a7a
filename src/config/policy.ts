// Reading the operator policy (model/policy.ts) from where only the operator writes: a policy file
// outside the configuration root (`--policy FILE` / KMS_SYNC_POLICY), environment variables and
// flags. Sources add up: lists join, switches turn on. A policy file inside the configuration's
// folder or its git checkout is refused: a pull request could edit it.
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import path from 'node:path';
import { DEFAULT_POLICY, mergePolicies, type OperatorPolicy } from '../model/index.js';
import { yamlLib } from './yaml-lib.js';

export const POLICY_API_VERSION = 'kms-sync-policy/v1';

export class PolicyError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'PolicyError';
  }
}

/** Operator settings given on the command line (the agent's and the CLI's flags). */
export interface PolicyFlags {
  policy?: string;
  allowEnv?: string[];
  allowNewRecipients?: boolean;
}

const LIST_SPLIT = /[\s,]+/;
const listOf = (v: string | undefined) =>
  (v ?? '')
    .split(LIST_SPLIT)
    .map((s) => s.trim())
    .filter(Boolean);
const on = (v: string | undefined) => /^(1|true|yes)$/i.test((v ?? '').trim());

/** The policy variables (KMS_SYNC_ENV_ALLOW, …) of an environment; undefined when none is set. */
export function policyFromEnv(env: NodeJS.ProcessEnv): Partial<OperatorPolicy> | undefined {
  const names = [
    'KMS_SYNC_ENV_ALLOW',
    'KMS_SYNC_STORE_HOSTS',
    'KMS_SYNC_STORE_CA_FILES',
    'KMS_SYNC_RECIPIENTS',
    'KMS_SYNC_ALLOW_NEW_RECIPIENTS',
    'KMS_SYNC_STORES_OUTSIDE_ROOT',
  ];
  const set = names.filter((n) => (env[n] ?? '').trim() !== '');
  if (set.length === 0) return undefined;
  const caFiles = listOf(env.KMS_SYNC_STORE_CA_FILES);
  for (const f of caFiles)
    if (!path.isAbsolute(f))
      throw new PolicyError(`KMS_SYNC_STORE_CA_FILES: ${JSON.stringify(f)} is not an absolute path`);
  return {
    envAllow: checkNames('KMS_SYNC_ENV_ALLOW', listOf(env.KMS_SYNC_ENV_ALLOW)),
    storeHosts: listOf(env.KMS_SYNC_STORE_HOSTS),
    caFiles,
    ...(env.KMS_SYNC_RECIPIENTS?.trim() ? { recipients: listOf(env.KMS_SYNC_RECIPIENTS) } : {}),
    allowNewRecipients: on(env.KMS_SYNC_ALLOW_NEW_RECIPIENTS),
    storesOutsideRoot: on(env.KMS_SYNC_STORES_OUTSIDE_ROOT),
    sources: set,
  };
}

function checkNames(where: string, names: string[]): string[] {
  for (const n of names)
    if (!/^[A-Za-z_][A-Za-z0-9_]*\*?$/.test(n))
      throw new PolicyError(
        `${where}: ${JSON.stringify(n)} is not a variable name (letters, digits, underscores; a trailing * matches a prefix)`,
      );
  return names;
}

const KNOWN: Record<string, string[]> = {
  '': ['apiVersion', 'env', 'stores', 'recipients'],
  env: ['allow'],
  stores: ['hosts', 'caFiles', 'outsideRoot'],
  recipients: ['allow', 'allowNew'],
};

/** Parses a policy file's text (YAML or JSON). Errors name the file and the field. */
export function parsePolicyFile(file: string, text: string): Partial<OperatorPolicy> {
  let doc: unknown;
  try {
    doc = yamlLib().parse(text);
  } catch (e) {
    throw new PolicyError(`policy file ${file}: not valid YAML or JSON (${(e as Error).message.split('\n')[0]})`);
  }
  const bad = (field: string, why: string) => new PolicyError(`policy file ${file}: ${field}: ${why}`);
  const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
  if (!isObj(doc)) throw bad('(top level)', 'must be a mapping');
  if (doc.apiVersion !== POLICY_API_VERSION) throw bad('apiVersion', `must be ${POLICY_API_VERSION}`);
  const section = (name: string): Record<string, unknown> => {
    const v = name === '' ? doc : (doc as Record<string, unknown>)[name];
    if (v === undefined || v === null) return {};
    if (!isObj(v)) throw bad(name, 'must be a mapping');
    for (const k of Object.keys(v))
      if (!KNOWN[name]!.includes(k))
        throw bad(name ? `${name}.${k}` : k, `unknown setting (known: ${KNOWN[name]!.join(', ')})`);
    return v;
  };
  section('');
  const strings = (sec: string, key: string): string[] | undefined => {
    const v = section(sec)[key];
    if (v === undefined || v === null) return undefined;
    if (!Array.isArray(v) || v.some((x) => typeof x !== 'string'))
      throw bad(`${sec}.${key}`, 'must be a list of strings');
    return v as string[];
  };
  const flag = (sec: string, key: string): boolean => {
    const v = section(sec)[key];
    if (v === undefined || v === null) return false;
    if (typeof v !== 'boolean') throw bad(`${sec}.${key}`, 'must be true or false');
    return v;
  };
  const caFiles = strings('stores', 'caFiles') ?? [];
  for (const f of caFiles)
    if (!path.isAbsolute(f)) throw bad('stores.caFiles', `${JSON.stringify(f)} is not an absolute path`);
  const recipients = strings('recipients', 'allow');
  return {
    envAllow: checkNames(`policy file ${file}: env.allow`, strings('env', 'allow') ?? []),
    storeHosts: strings('stores', 'hosts') ?? [],
    caFiles,
    ...(recipients ? { recipients } : {}),
    allowNewRecipients: flag('recipients', 'allowNew'),
    storesOutsideRoot: flag('stores', 'outsideRoot'),
    sources: [`policy file ${file}`],
  };
}

/** The nearest folder at or above `dir` holding `.git` (the checkout a pull request controls), if any. */
function checkoutOf(dir: string): string | undefined {
  for (let d = dir; ; d = path.dirname(d)) {
    if (existsSync(path.join(d, '.git'))) return d;
    if (path.dirname(d) === d) return undefined;
  }
}

const inside = (child: string, parent: string) =>
  child === parent || child.startsWith(parent.endsWith(path.sep) ? parent : parent + path.sep);
const real = (p: string) => {
  try {
    return realpathSync(p);
  } catch {
    return path.resolve(p);
  }
};

/**
 * The operator policy of a run: the policy file (`flags.policy`, else KMS_SYNC_POLICY), the
 * environment's KMS_SYNC_* policy variables and the flags, joined. `configRoot`: the folder of the
 * configuration (the CLI's -f folder, the agent's checkout); a policy file inside it, or inside the
 * git checkout that holds it, is refused.
 */
export function readOperatorPolicy(o: {
  flags?: PolicyFlags;
  env?: NodeJS.ProcessEnv;
  configRoot?: string;
  policyFlagName?: string;
}): OperatorPolicy {
  const env = o.env ?? process.env;
  let policy: OperatorPolicy = { ...DEFAULT_POLICY, sources: [] };
  const file = o.flags?.policy ?? (env.KMS_SYNC_POLICY?.trim() || undefined);
  if (file) {
    const from = o.flags?.policy ? (o.policyFlagName ?? '--policy') : 'KMS_SYNC_POLICY';
    const abs = real(file);
    if (o.configRoot) {
      const root = real(o.configRoot);
      const checkout = checkoutOf(root);
      for (const r of [root, ...(checkout ? [checkout] : [])]) {
        if (inside(abs, r)) {
          throw new PolicyError(
            `${from} ${file}: the policy file is inside ${r === root ? 'the configuration folder' : 'the git checkout of the configuration'} (${r}), where a pull request or a commit can change it; keep it outside (the workflow's own path, a file from the default branch, the agent's ConfigMap)`,
          );
        }
      }
    }
    let text: string;
    try {
      text = readFileSync(abs, 'utf8');
    } catch (e) {
      throw new PolicyError(
        `${from} ${file}: cannot read the policy file (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
      );
    }
    policy = mergePolicies(policy, parsePolicyFile(file, text));
  }
  const fromEnv = policyFromEnv(env);
  if (fromEnv) policy = mergePolicies(policy, fromEnv);
  if (o.flags?.allowEnv?.length)
    policy = mergePolicies(policy, { envAllow: checkNames('--allow-env', o.flags.allowEnv), sources: ['--allow-env'] });
  if (o.flags?.allowNewRecipients)
    policy = mergePolicies(policy, { allowNewRecipients: true, sources: ['--allow-new-recipients'] });
  return policy;
}
