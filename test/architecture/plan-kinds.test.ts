// One kind, one place (DESIGN.md "Style anchors"): each file of src/plan/kinds/ plans the
// operations of its own kind only, the engine (plan/diff.ts) none, and the registry runs every
// kind in dependency order.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { KIND_ORDER } from '../../src/model/index.js';
import { PLAN_KINDS } from '../../src/plan/kinds/index.js';

const plan = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'src', 'plan');
/** The kinds of the operations and unmanaged items a file builds (`kind: 'client'`). */
const kindsBuilt = (file: string) =>
  [
    ...new Set(
      [...readFileSync(file, 'utf8').matchAll(/\bkind: '(project|env|template|client|key|endpoint)'/g)].map(
        (m) => m[1],
      ),
    ),
  ].sort();

describe('plan units', () => {
  it('each kind file builds the operations of its own kind only', () => {
    const files = readdirSync(path.join(plan, 'kinds')).filter((f) =>
      (KIND_ORDER as readonly string[]).includes(f.replace(/\.ts$/, '')),
    );
    expect(files.map((f) => f.replace(/\.ts$/, '')).sort()).toEqual([...KIND_ORDER].sort());
    for (const f of files)
      expect({ file: f, kinds: kindsBuilt(path.join(plan, 'kinds', f)) }).toEqual({
        file: f,
        kinds: [f.replace(/\.ts$/, '')],
      });
  });

  it('the engine and the shared files build none', () => {
    for (const f of ['diff.ts', 'compare.ts', 'kinds/contract.ts', 'kinds/index.ts'])
      expect({ file: f, kinds: kindsBuilt(path.join(plan, f)) }).toEqual({ file: f, kinds: [] });
  });

  it('the registry plans every kind, in dependency order', () => {
    expect(PLAN_KINDS.flatMap((k) => k.kinds)).toEqual([...KIND_ORDER]);
  });
});
