// JSON Schema validation (ajv, draft-07) of one parsed document, with errors turned into precise,
// human messages and field paths.
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { PathSegment } from './diagnostics.js';
import { closest } from './suggest.js';

/** Absolute path of `schemas/kms-sync.schema.json` in the installed package (src/ and dist/ alike). */
export function schemaFilePath(): string {
  return fileURLToPath(new URL('../../schemas/kms-sync.schema.json', import.meta.url));
}

let schemaCache: Record<string, unknown> | undefined;

export function loadSchema(): Record<string, unknown> {
  schemaCache ??= JSON.parse(readFileSync(schemaFilePath(), 'utf8')) as Record<string, unknown>;
  return schemaCache;
}

/** Editor-only keywords (yaml-language-server / VS Code) that the schema uses. */
export const EDITOR_KEYWORDS = ['patternErrorMessage'] as const;

type AddFormats = (ajv: Ajv) => Ajv;
const addFormats: AddFormats =
  ((addFormatsModule as unknown as { default?: AddFormats }).default ?? (addFormatsModule as unknown as AddFormats));

/**
 * An ajv instance in strict mode with formats and the editor keywords declared. The loader's own
 * instance skips checking the schema against the JSON Schema meta-schema (`validateSchema: false`,
 * ~0.1 s of every start): the schema is ours and test/config/schema.test.ts checks it with the
 * default instance.
 */
export function createAjv(opts: { validateSchema?: boolean } = {}): Ajv {
  const ajv = new Ajv({ strict: true, allErrors: true, verbose: true, ...(opts.validateSchema === false ? { validateSchema: false } : {}) });
  addFormats(ajv);
  ajv.addVocabulary([...EDITOR_KEYWORDS]);
  return ajv;
}

let validatorCache: ValidateFunction | undefined;

function validator(): ValidateFunction {
  validatorCache ??= createAjv({ validateSchema: false }).compile(loadSchema());
  return validatorCache;
}

export interface SchemaIssue {
  segments: PathSegment[];
  /** Locate the key of the last segment rather than its value. */
  atKey: boolean;
  message: string;
}

/** Validates one document; returns one issue per problem, in document order of ajv. */
export function validateAgainstSchema(value: unknown): SchemaIssue[] {
  const validate = validator();
  if (validate(value)) return [];
  const issues: SchemaIssue[] = [];
  const seen = new Set<string>();
  for (const e of validate.errors ?? []) {
    const issue = toIssue(e, value);
    const key = `${issue.segments.join('\u0000')}\u0001${issue.message}`;
    if (seen.has(key)) continue;
    seen.add(key);
    issues.push(issue);
  }
  return issues;
}

function pointerSegments(pointer: string, root: unknown): PathSegment[] {
  if (pointer === '') return [];
  const segs: PathSegment[] = [];
  let node: unknown = root;
  for (const raw of pointer.split('/').slice(1)) {
    const text = raw.replaceAll('~1', '/').replaceAll('~0', '~');
    if (Array.isArray(node)) {
      const i = Number(text);
      segs.push(i);
      node = node[i];
    } else {
      segs.push(text);
      node = node && typeof node === 'object' ? (node as Record<string, unknown>)[text] : undefined;
    }
  }
  return segs;
}

const TYPE_NAMES: Record<string, string> = {
  string: 'a string',
  integer: 'an integer',
  number: 'a number',
  boolean: 'true or false',
  object: 'a mapping',
  array: 'a list',
  null: 'empty',
};

/** Short description of a value for messages: `"abc"`, `42`, `a list`, `an empty value`. */
export function describeValue(v: unknown): string {
  if (v === null || v === undefined) return 'an empty value';
  if (Array.isArray(v)) return 'a list';
  if (typeof v === 'object') return 'a mapping';
  if (typeof v === 'string') return JSON.stringify(v.length > 60 ? `${v.slice(0, 57)}...` : v);
  return String(v);
}


const FORMAT_MESSAGES: Record<string, string> = {
  uri: 'must be an absolute URL such as https://api.example.com',
};

function toIssue(e: ErrorObject, root: unknown): SchemaIssue {
  const segments = pointerSegments(e.instancePath, root);
  const parent = (e.parentSchema ?? {}) as Record<string, unknown>;
  const got = describeValue(e.data);
  const params = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'additionalProperties': {
      const field = String(params.additionalProperty);
      const allowed = Object.keys((parent.properties ?? {}) as Record<string, unknown>);
      const guess = closest(field, allowed);
      const hint = guess ? `did you mean "${guess}"?` : `allowed: ${allowed.join(', ')}`;
      return { segments: [...segments, field], atKey: true, message: `unknown field "${field}" (${hint})` };
    }
    case 'required':
      return { segments, atKey: false, message: `missing required field "${String(params.missingProperty)}"` };
    case 'dependencies': {
      const field = String(params.property);
      const needed = String(params.missingProperty);
      const what = String(parent.title ?? 'resource').toLowerCase();
      return {
        segments: [...segments, field],
        atKey: true,
        message:
          `"${field}" can only be set where the ${what} is defined (the occurrence with "${needed}"); ` +
          `an occurrence without "${needed}" only references the ${what}`,
      };
    }
    case 'type': {
      const types = Array.isArray(params.type) ? (params.type as string[]) : [String(params.type)];
      const want = types.map((t) => TYPE_NAMES[t] ?? t).join(' or ');
      return { segments, atKey: false, message: `must be ${want} (got ${got})` };
    }
    case 'enum': {
      const values: string[] = [];
      for (const v of (e.schema as unknown[]) ?? []) {
        const s = String(v);
        if (!values.some((x) => x.toLowerCase() === s.toLowerCase())) values.push(s);
      }
      return { segments, atKey: false, message: `must be one of ${values.join(', ')} (got ${got})` };
    }
    case 'const':
      return { segments, atKey: false, message: `must be ${JSON.stringify(params.allowedValue)} (got ${got})` };
    case 'pattern': {
      const custom = typeof parent.patternErrorMessage === 'string' ? parent.patternErrorMessage : undefined;
      return {
        segments,
        atKey: false,
        message: `${custom ?? `must match the pattern ${String(params.pattern)}`} (got ${got})`,
      };
    }
    case 'format': {
      const format = String(params.format);
      return { segments, atKey: false, message: `${FORMAT_MESSAGES[format] ?? `must be a valid ${format}`} (got ${got})` };
    }
    case 'minimum':
    case 'maximum':
    case 'exclusiveMinimum':
    case 'exclusiveMaximum':
      return { segments, atKey: false, message: `must be ${String(params.comparison)} ${String(params.limit)} (got ${got})` };
    case 'minLength':
      return {
        segments,
        atKey: false,
        message: params.limit === 1 ? 'must not be empty' : `must be at least ${String(params.limit)} characters long`,
      };
    case 'maxLength':
      return { segments, atKey: false, message: `must be at most ${String(params.limit)} characters long` };
    default:
      return { segments, atKey: false, message: e.message ?? `is invalid (${e.keyword})` };
  }
}

