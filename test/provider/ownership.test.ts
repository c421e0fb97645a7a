// The provider may not import plan/ or cli/ (DESIGN.md layers), so it mirrors the ownership
// markers and the owner derivation of the reconciler. These tests keep the copies equal: both
// engines must read each other's resources the same way.
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveOwner } from '../../src/cli/owner.js';
import { emptyDesiredState } from '../../src/model/index.js';
import { managedMetadata, OWNER_ID_KEY, PROTECTED_MARKER_KEY, withoutMarkers } from '../../src/plan/ownership.js';
import { deriveOwner } from '../../src/provider/owner.js';
import * as state from '../../src/provider/resources/state.js';
import { workspace } from '../support/cli.js';

describe('provider ownership markers', () => {
  it('are the reconciler’s', () => {
    expect(state.OWNER_ID_KEY).toBe(OWNER_ID_KEY);
    expect(state.PROTECTED_MARKER_KEY).toBe(PROTECTED_MARKER_KEY);
    const written = managedMetadata({ team: 'payments' }, true, 'github.com/acme/platform:kms');
    expect(state.userMetadata(written)).toEqual(withoutMarkers(written));
  });

  it('derive the same owner id as kms-sync for the same folder', async () => {
    const repo = workspace();
    execFileSync('git', ['init', '-q', repo]);
    execFileSync('git', ['-C', repo, 'remote', 'add', 'origin', 'https://user:secret@github.com/acme/platform.git']);
    const dir = path.join(repo, 'infra', 'kms');
    mkdirSync(dir, { recursive: true });
    const expected = (await resolveOwner(emptyDesiredState(), dir)).owner;
    expect(expected).toBe('github.com/acme/platform:infra/kms');
    expect(await deriveOwner(dir)).toBe(expected);
    const outside = workspace();
    expect(await deriveOwner(outside)).toBe((await resolveOwner(emptyDesiredState(), outside)).owner);
  });
});
