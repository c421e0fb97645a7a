// Both engines read each other's resources the same way: the provider uses the reconciler's
// ownership markers (model/ownership.ts) and owner derivation (model/owner.ts), and what the
// provider reads back as user metadata never includes a marker kms-sync writes.
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { resolveOwner } from '../../src/engine/owner.js';
import { APPLIED_KEY, deriveOwner, emptyDesiredState, managedMetadata } from '../../src/model/index.js';
import * as state from '../../src/provider/resources/state.js';
import { workspace } from '../support/cli.js';

describe('provider ownership markers', () => {
  it('strip every marker the reconciler writes, applied digest included', () => {
    const written = managedMetadata({ team: 'payments' }, true, 'github.com/acme/platform:kms', '0123456789abcdef');
    expect(written[APPLIED_KEY]).toBe('0123456789abcdef');
    expect(state.userMetadata(written)).toEqual({ team: 'payments' });
  });

  it('derive the owner id from the git remote and folder, credentials dropped', async () => {
    const repo = workspace();
    execFileSync('git', ['init', '-q', repo]);
    execFileSync('git', ['-C', repo, 'remote', 'add', 'origin', 'https://user:secret@github.com/acme/platform.git']);
    const dir = path.join(repo, 'infra', 'kms');
    mkdirSync(dir, { recursive: true });
    expect(await deriveOwner(dir)).toBe('github.com/acme/platform:infra/kms');
    expect((await resolveOwner(emptyDesiredState(), dir)).owner).toBe('github.com/acme/platform:infra/kms');
    const outside = workspace();
    expect(await deriveOwner(outside)).toBe(`local:${path.basename(outside)}`);
    expect((await resolveOwner({ ...emptyDesiredState(), owner: 'declared' }, outside)).owner).toBe('declared');
  });
});
