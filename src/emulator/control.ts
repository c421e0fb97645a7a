// The emulator's own routes under /__emulator (not part of the service contract): per-route
// request counts, scripted faults and bulk seeding, for tests and benchmarks. Off unless the
// emulator is started with them (`--control`), and then they need a project key like the API.
// Every body is checked whole before anything changes: a bad request changes nothing.
import { ApiError, badRequest } from './errors.js';
import { checkDepth, checkObject, type FieldRule } from './validate.js';

export const CONTROL_BASE = '/__emulator';

export const FAULT_MODES = ['error', '429', 'drop', 'drop-after-commit', 'delay', 'delay-after-commit'] as const;
export type FaultMode = (typeof FAULT_MODES)[number];

/** A scripted fault: the next `times` requests matching method/route get `mode`. */
export interface FaultRule {
  method?: string;
  /** Route template (e.g. `/client`, `/client/{client_uuid}`) or a RegExp tested against the URL path. */
  route?: string | RegExp;
  mode: FaultMode;
  status?: number;
  times?: number;
  delayMs?: number;
  retryAfterSeconds?: number;
}

export const MAX_FAULT_RULES = 100;

const faultFields: Record<string, FieldRule> = {
  method: { type: 'string', pattern: /^(GET|POST|PUT|DELETE)$/, patternHint: 'GET, POST, PUT or DELETE' },
  route: { type: 'string', maxLength: 200 },
  mode: {
    type: 'string',
    required: true,
    pattern: new RegExp(`^(${FAULT_MODES.join('|')})$`),
    patternHint: FAULT_MODES.join(', '),
  },
  status: { type: 'integer', min: 400, max: 599 },
  times: { type: 'integer', min: 1, max: 1_000_000 },
  delayMs: { type: 'integer', min: 0, max: 600_000 },
  retryAfterSeconds: { type: 'integer', min: 0, max: 86_400 },
};

/** Checks a POST /faults body (one rule, or `{rules: [...]}`) against the known route templates. */
export function parseFaultRules(body: unknown, templates: readonly string[]): FaultRule[] {
  const isRules = !!body && typeof body === 'object' && !Array.isArray(body) && 'rules' in body;
  let rules: unknown[];
  if (isRules) {
    checkObject(body, { rules: { type: 'array', required: true, min: 1, max: MAX_FAULT_RULES } });
    rules = (body as { rules: unknown[] }).rules;
  } else rules = [body];
  return rules.map((rule, i) => {
    const path = isRules ? `body.rules[${i}]` : 'body';
    checkObject(rule, faultFields, path);
    const r = rule as FaultRule;
    if (typeof r.route === 'string' && !templates.includes(r.route))
      throw badRequest(
        `${path}.route: ${JSON.stringify(r.route)} is not a route template (one of ${templates.join(', ')})`,
      );
    if (r.status !== undefined && r.mode !== 'error') throw badRequest(`${path}.status: only applies to mode "error"`);
    if (r.delayMs !== undefined && !r.mode.startsWith('delay'))
      throw badRequest(`${path}.delayMs: only applies to the delay modes`);
    if (r.retryAfterSeconds !== undefined && r.mode !== '429')
      throw badRequest(`${path}.retryAfterSeconds: only applies to mode "429"`);
    return r;
  });
}

export interface ControlContext {
  counts(): Record<string, number>;
  resetCounts(): void;
  addFaults(rules: FaultRule[]): number;
  clearFaults(): void;
  seed(body: unknown): unknown;
  templates: readonly string[];
}

interface ControlRoute {
  method: string;
  path: string;
  handle(ctx: ControlContext, body: unknown): unknown;
}

const ROUTES: ControlRoute[] = [
  { method: 'GET', path: '/counts', handle: (c) => c.counts() },
  {
    method: 'DELETE',
    path: '/counts',
    handle: (c) => {
      c.resetCounts();
      return { success: true };
    },
  },
  {
    method: 'POST',
    path: '/faults',
    handle: (c, body) => {
      const rules = parseFaultRules(body, c.templates);
      return { success: true, active: c.addFaults(rules) };
    },
  },
  {
    method: 'DELETE',
    path: '/faults',
    handle: (c) => {
      c.clearFaults();
      return { success: true };
    },
  },
  {
    method: 'POST',
    path: '/seed',
    handle: (c, body) => {
      checkDepth(body);
      return c.seed(body);
    },
  },
];

/** The route for `method path` (path below CONTROL_BASE), or the 404/405 to answer. */
export function findControlRoute(method: string, path: string): ControlRoute {
  const onPath = ROUTES.filter((r) => r.path === path);
  if (onPath.length === 0)
    throw new ApiError(
      404,
      'NOT_FOUND',
      `no control route ${CONTROL_BASE}${path.slice(0, 100)} (there are ${[...new Set(ROUTES.map((r) => CONTROL_BASE + r.path))].join(', ')})`,
    );
  const route = onPath.find((r) => r.method === method);
  if (!route) {
    const allow = onPath.map((r) => r.method).join(', ');
    throw new ApiError(
      405,
      'METHOD_NOT_ALLOWED',
      `${method} is not allowed on ${CONTROL_BASE}${path} (allowed: ${allow})`,
      { allow },
    );
  }
  return route;
}
