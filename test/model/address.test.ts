// Addresses are written out per kind (model/identity.ts `address`) instead of through identityKey's
// parts array: they must stay identityKey's strings, which plans, saved plans and inventories hold.
import { describe, expect, it } from 'vitest';
import { address, identityKey } from '../../src/model/identity.js';

describe('address', () => {
  it('is identityKey of each kind', () => {
    for (const [pe, name, other] of [
      ['acme-production', 'globex', 'primary'],
      ['a-b-dev', 'with/slash', 'ünï cödé'],
      ['', '', ''],
    ] as const) {
      expect(address.project(name)).toBe(identityKey('project', [name]));
      expect(address.env(pe)).toBe(identityKey('env', [pe]));
      expect(address.template(pe, name)).toBe(identityKey('template', [pe, name]));
      expect(address.client(pe, name)).toBe(identityKey('client', [pe, name]));
      expect(address.key(pe, name, other)).toBe(identityKey('key', [pe, name, other]));
      expect(address.endpoint(pe, 'get', `/r/${other}`)).toBe(identityKey('endpoint', [pe, `GET:/r/${other}`]));
    }
  });
});
