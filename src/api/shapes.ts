// What a 2xx answer must at least look like before kms-sync builds on it. Tolerant where the
// contract allows (unknown fields ignored, optional fields optional), strict where a wrong shape
// would be misread: a list is only a list inside its envelope, an item only counts with its identity.

/** Checks one value; returns what is wrong with it (a short phrase), or undefined. */
export type Shape = (value: unknown) => string | undefined;

const isObject = (v: unknown): v is Record<string, unknown> => !!v && typeof v === 'object' && !Array.isArray(v);
const isCount = (v: unknown) => typeof v === 'number' && Number.isInteger(v) && v >= 0;

/** A short description of a JSON value, for messages ("an object with keys [a, b]", "a string"). */
export function describeJson(v: unknown): string {
  if (v === undefined) return 'an empty body';
  if (v === null) return 'null';
  if (Array.isArray(v)) return `an array of ${v.length}`;
  if (isObject(v)) {
    const keys = Object.keys(v);
    return keys.length === 0
      ? 'an empty object {}'
      : `an object with keys [${keys.slice(0, 6).join(', ')}${keys.length > 6 ? ', …' : ''}]`;
  }
  return `a ${typeof v}`;
}

/** Any object having string fields `fields` (the first present of each alternative `a|b`). */
export function objectWith(what: string, ...fields: string[]): Shape {
  // Split once: a list page checks 100 items, a plan of 100,000 clients 100,000.
  const alternatives = fields.map((f) => f.split('|'));
  return (v) => {
    if (!isObject(v)) return `expected ${what}, got ${describeJson(v)}`;
    for (let i = 0; i < alternatives.length; i++) {
      const names = alternatives[i]!;
      let found = false;
      for (let j = 0; j < names.length && !found; j++) found = typeof v[names[j]!] === 'string' && v[names[j]!] !== '';
      if (!found) return `expected ${what} with a string '${names.join("' or '")}', got ${describeJson(v)}`;
    }
    return undefined;
  };
}

export const projectShape: Shape = (v) => {
  const base = objectWith('a project', 'slug')(v);
  if (base) return base;
  const envs = (v as { envs?: unknown }).envs;
  if (envs === undefined) return undefined;
  const list = isObject(envs) ? envs.list : undefined;
  if (!isObject(envs) || (list !== undefined && !Array.isArray(list)))
    return `expected a project whose 'envs' is {count, list: [...]}, got envs ${describeJson(envs)}`;
  for (const [i, e] of (list ?? []).entries()) {
    const problem = objectWith('an environment', 'project_env')(e);
    if (problem) return `envs.list[${i}]: ${problem}`;
  }
  return undefined;
};
export const templateShape = objectWith('a template', 'id', 'name');
export const clientShape = objectWith('a client', 'id|client_uuid', 'name');
export const endpointShape = objectWith('an endpoint', 'method', 'path');
export const logShape: Shape = (v) => (isObject(v) ? undefined : `expected a log entry object, got ${describeJson(v)}`);

/** A client as a create/update answers it: with its keys (the raw ones live only there). */
export const clientWithKeysShape: Shape = (v) => {
  const base = clientShape(v);
  if (base) return base;
  return Array.isArray((v as { keys?: unknown }).keys)
    ? undefined
    : `expected a client with its 'keys' array, got ${describeJson(v)}`;
};

/** A sanity bound: 10 million items at 100 a page. */
export const MAX_PAGES = 100_000;

/** The documented list envelope `{data: [...], pagination: {total, page, limit, pages}}`, each item of `item`'s shape. */
export function pageOf(item: Shape): Shape {
  return (v) => {
    const envelope = 'the list envelope {data: [...], pagination}';
    if (!isObject(v) || !Array.isArray(v.data) || !isObject(v.pagination))
      return `expected ${envelope}, got ${describeJson(v)}`;
    const p = v.pagination;
    if (!isCount(p.pages) && !isCount(p.total))
      return `expected ${envelope} whose pagination has 'pages' or 'total', got pagination ${describeJson(p)}`;
    if (
      (isCount(p.pages) && (p.pages as number) > MAX_PAGES) ||
      (isCount(p.total) && (p.total as number) > MAX_PAGES * 100)
    )
      return `pagination ${JSON.stringify({ pages: p.pages, total: p.total })} is more than the ${MAX_PAGES} pages kms-sync reads of one list`;
    for (let i = 0; i < v.data.length; i++) {
      const problem = item(v.data[i]);
      if (problem) return `data[${i}]: ${problem}`;
    }
    return undefined;
  };
}

/** An array of exactly `n` items of `item`'s shape (a bulk create answers one per request item, in order). */
export function arrayOf(item: Shape, n: number): Shape {
  return (v) => {
    if (!Array.isArray(v)) return `expected an array of ${n}, got ${describeJson(v)}`;
    if (v.length !== n) return `expected an array of ${n} (one per item sent), got ${v.length}`;
    for (const [i, x] of v.entries()) {
      const problem = item(x);
      if (problem) return `[${i}]: ${problem}`;
    }
    return undefined;
  };
}
