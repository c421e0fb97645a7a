// The contract of one Terraform resource type of the provider: its identity (what forces a
// replacement), its checks, its import id, and its create/read/update/delete on top of the
// per-kind handlers of apply/. The generic engine (provider.ts) does the protocol around it.
import type { Diagnostics } from '../diagnostics.js';
import { isUnknown, type TfObject, type TfValue } from '../values/types.js';
import type { ChangeAction, Engine, ProviderConfig } from '../engine.js';

export interface ResourceType {
  typeName: string;
  /** Attributes the service cannot change in place: a change plans a replacement. */
  replaceOn: readonly string[];
  /** Two values of a replaceOn attribute that name the same thing (no replacement), given the provider's configuration. */
  sameTarget?(attr: string, prior: TfValue, planned: TfValue, config: ProviderConfig): boolean;
  /** Computed attributes whose value is only known after an update (unknown in its plan). */
  changeOnUpdate?: readonly string[];
  /** Checks beyond the schema's types, on a configuration that may hold unknowns. */
  validate(config: TfObject, d: Diagnostics): void;
  /** Computed values the plan can already tell (identity-derived ids); the rest stay unknown. */
  planKnown?(planned: TfObject): TfObject;
  /** A resource plan Terraform asks about: may add diagnostics and mark attributes to replace (rotation). */
  planExtra?(prior: TfObject, planned: TfObject, config: TfObject, now: Date): { replace: string[]; planned: TfObject };
  /** `terraform import` id → the identity attributes of the state to read. */
  parseImportId(id: string): TfObject;
  /**
   * The ownership rule (model/ownership.ts, the one `plan` follows) for a change Terraform plans:
   * throws the diagnostic when this configuration may not make it (another configuration's
   * object, or a key of its client). Read from the shared listings; create, update and delete
   * check again on a fresh read.
   */
  guard?(engine: Engine, prior: TfObject | null, planned: TfObject | null, action: ChangeAction): Promise<void>;
  /** `d`: warnings the create reports beside its state. `config`: the configuration (what it declares, for the applied digest). */
  create(engine: Engine, planned: TfObject, d?: Diagnostics, config?: TfObject): Promise<TfObject>;
  /** Terraform sent a state of this type (prior state of a read, plan or apply): it knows that object. */
  seen?(engine: Engine, state: TfObject): Promise<void>;
  /**
   * The live object as state, or null when it is gone. `importing`: the state holds only the
   * identity, and every attribute the service knows is taken from it.
   */
  read(engine: Engine, state: TfObject, importing: boolean, d?: Diagnostics): Promise<TfObject | null>;
  update(engine: Engine, prior: TfObject, planned: TfObject, config?: TfObject): Promise<TfObject>;
  /** `d`: warnings the delete reports (an object kept in the service because it holds another configuration's). */
  delete(engine: Engine, prior: TfObject, d?: Diagnostics): Promise<void>;
}

export interface DataSourceType {
  typeName: string;
  validate(config: TfObject, d: Diagnostics): void;
  read(engine: Engine, config: TfObject): Promise<TfObject>;
}

/**
 * An ephemeral resource type (Terraform >= 1.10): opened during plan and apply on a wholly known
 * configuration, its result handed on and never written to a plan or state.
 */
export interface EphemeralResourceType {
  typeName: string;
  validate(config: TfObject, d: Diagnostics): void;
  open(engine: Engine, config: TfObject): Promise<TfObject>;
}

// ---------------------------------------------------------------- small helpers for the kinds
export const known = (v: TfValue | undefined): v is Exclude<TfValue, null> =>
  v !== null && v !== undefined && !isUnknown(v);
export const str = (v: TfValue | undefined): string | undefined => (typeof v === 'string' ? v : undefined);
export const num = (v: TfValue | undefined): number | undefined => (typeof v === 'number' ? v : undefined);
export const bool = (v: TfValue | undefined): boolean | undefined => (typeof v === 'boolean' ? v : undefined);

/** Runs `check` on a known attribute value; its message becomes an error at that attribute. */
export function check(
  d: Diagnostics,
  config: TfObject,
  attr: string,
  summary: string,
  checkFn: (v: TfValue) => string | undefined,
): void {
  const v = config[attr];
  if (!known(v)) return;
  const problem = checkFn(v);
  if (problem) d.error(summary, problem, [attr]);
}

export function matches(re: RegExp, what: string) {
  return (v: TfValue) => (typeof v === 'string' && re.test(v) ? undefined : `${JSON.stringify(v)} is not ${what}`);
}

/** Free-form JSON attributes (`dynamic` in the schema) must hold an object. */
export const isObject = (v: TfValue) =>
  v !== null && typeof v === 'object' && !Array.isArray(v)
    ? undefined
    : 'must be an object (a map of keys to values), e.g. { team = "payments" }';

export const PROJECT_SLUG = /^[a-z0-9]([a-z0-9-]{0,48}[a-z0-9])?$/;
export const ENV_TYPE = /^[a-z][a-z0-9]{0,19}$/;
/** `<project>-<type>`: the project slug may itself hold hyphens. */
export const PROJECT_ENV = /^[a-z0-9]([a-z0-9-]{0,48}[a-z0-9])?-[a-z][a-z0-9]{0,19}$/;

/** Splits an import id into `n` parts at `/`; the last part keeps any further slashes (endpoint paths). */
export function splitImportId(id: string, names: readonly string[], example: string): string[] {
  const parts: string[] = [];
  let rest = id;
  for (let i = 0; i < names.length - 1; i++) {
    const at = rest.indexOf('/');
    if (at <= 0) break;
    parts.push(rest.slice(0, at));
    rest = rest.slice(at + 1);
  }
  parts.push(rest);
  if (parts.length !== names.length || parts.some((p) => p === '')) {
    throw new ImportIdError(
      `import id ${JSON.stringify(id)} is not ${names.map((n) => `<${n}>`).join('/')}, e.g. ${example}`,
    );
  }
  return parts;
}

export class ImportIdError extends Error {}

/** An apply that failed after the object came to exist: Terraform keeps `state` (tainted) with the error. */
export class PartialApplyError extends Error {
  readonly state: TfObject;
  readonly summary: string;
  constructor(summary: string, detail: string, state: TfObject) {
    super(detail);
    this.summary = summary;
    this.state = state;
  }
}

/** The attributes of a state that the identity gives, as strings. */
export function ids(s: TfObject, ...names: string[]): string[] {
  return names.map((n) => {
    const v = s[n];
    if (typeof v !== 'string') throw new Error(`${n} is not known`);
    return v;
  });
}
