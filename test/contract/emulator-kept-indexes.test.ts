// The emulator keeps per-environment indexes between requests (the client list in order, the clients
// per template, each client's list item as JSON text) so that a page or a create does not walk the
// whole environment. They must answer exactly what a cold service gives: after every random create,
// update, template move and delete, the warm service's pages, template counts and capacity refusals
// are compared with those of the same state loaded fresh from its data file's JSON (no index kept yet).
// Whole unfiltered pages are kept too: every page is read twice (the second answer is the kept one)
// and the writes include key adds, renames and deletes, address lists and seeds into the environment.
import { describe, expect, it } from 'vitest';
import { ApiError } from '../../src/emulator/errors.js';
import { KmsService } from '../../src/emulator/service.js';
import { xorshift32 } from '../support/xorshift.js';

const PE = 'ix-prod';
const cold = (svc: KmsService) => KmsService.fromJSON(JSON.parse(JSON.stringify(svc.toJSON())));

/** What a call answers: its JSON, or its refusal's status and code (ids and keys it mints left out). */
function outcome(call: () => unknown): string {
  try {
    call();
    return 'ok';
  } catch (e) {
    if (e instanceof ApiError) return `${e.status} ${e.code} ${e.message}`;
    throw e;
  }
}

/** Every page of the environment's clients (whole, and per template), its templates and its project view. */
function reads(svc: KmsService, templateIds: string[]): string[] {
  const out: string[] = [];
  for (const templateId of [null, ...templateIds]) {
    for (let page = 1; ; page++) {
      if (templateId === null) svc.listClients(PE, { name: null, type: null, templateId, page, limit: 7 });
      const text = svc.listClients(PE, { name: null, type: null, templateId, page, limit: 7 }).text;
      out.push(text);
      if (page >= JSON.parse(text).pagination.pages) break;
    }
  }
  out.push(JSON.stringify(svc.listTemplates(PE, 1, 100)), JSON.stringify(svc.getProject(PE)));
  return out;
}

describe('the emulator’s kept indexes answer as a cold service does', () => {
  it.each([1, 2, 3, 4])('random creates, moves and deletes (seed %i)', (seed) => {
    const draw = xorshift32(seed * 7919);
    const svc = new KmsService();
    svc.seed({ project: 'ix', type: 'prod', templates: 4, clients: 20 + draw(20), keysPerClient: 1 });
    let templateIds = (svc.listTemplates(PE, 1, 100).data as { id: string }[]).map((t) => t.id);
    const clientIds = () =>
      JSON.parse(svc.listClients(PE, { name: null, type: null, templateId: null, page: 1, limit: 100 }).text).data.map(
        (c: { id: string }) => c.id,
      ) as string[];
    let made = 0;
    for (let step = 0; step < 90; step++) {
      expect(reads(svc, templateIds)).toEqual(reads(cold(svc), templateIds));
      const ids = clientIds();
      const pick = <T>(xs: T[]) => xs[draw(xs.length)]!;
      const op = draw(15);
      // A create is asked of the warm service and of a cold copy: same acceptance or same refusal.
      const create = (n: number) => {
        const body = Array.from({ length: n }, () => ({ name: `new-${made++}`, templateId: pick(templateIds) }));
        const expected = outcome(() => cold(svc).createClients(PE, n === 1 ? body[0] : body));
        expect(outcome(() => svc.createClients(PE, n === 1 ? body[0] : body))).toBe(expected);
      };
      if (op < 4 || ids.length === 0) create(1 + draw(12));
      else if (op < 6) {
        const id = pick(ids);
        const body = { templateId: pick(templateIds) };
        const expected = outcome(() => cold(svc).updateClient(id, PE, body));
        expect(outcome(() => svc.updateClient(id, PE, body))).toBe(expected);
      } else if (op < 8) svc.deleteClient(pick(ids), PE, null);
      else if (op < 9) svc.updateClient(pick(ids), PE, { name: `renamed-${step}`, metadata: { step: String(step) } });
      else if (op === 10) {
        const id = pick(ids);
        svc.updateClient(id, PE, { keys: [{ name: `k-${step}` }], ipWhitelist: [`10.${step}.0.0/16`] });
      } else if (op === 11) {
        const id = pick(ids);
        const keys = (svc.getClient(id, PE) as { keys: { id: string }[] }).keys;
        if (keys.length > 0 && draw(2) === 0) svc.deleteClient(id, PE, pick(keys).id);
        else if (keys.length > 0) svc.updateClient(id, PE, { keys: [{ id: pick(keys).id, name: `r-${step}` }] });
      } else if (op === 12) {
        svc.seed({ project: 'ix', type: 'prod', templates: 1, clients: 1 + draw(3), keysPerClient: 1 });
        templateIds = (svc.listTemplates(PE, 1, 100).data as { id: string }[]).map((t) => t.id);
      } else if (op === 13) {
        // Reads that change usage and stats, never a listed field.
        svc.getClient(pick(ids), PE);
      } else if (templateIds.length > 1) {
        const templateId = pick(templateIds);
        svc.deleteProject(PE, { kind: 'template', envId: null, templateId, force: true });
        templateIds = templateIds.filter((t) => t !== templateId);
      }
    }
    expect(reads(svc, templateIds)).toEqual(reads(cold(svc), templateIds));
    // The indexes are not part of the data file.
    expect(JSON.stringify(svc.toJSON())).not.toMatch(/templateUse|clientList|clientPages/);
  });
});
