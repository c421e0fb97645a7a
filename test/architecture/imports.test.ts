// The import graph of src/ (DESIGN.md "Layers"): no module imports, through any chain, a module
// that imports it back (the backends of secrets/ once imported store.ts, which held the table that
// imports every backend), and plan/ reads nothing but the model (DESIGN.md's table). Imports are read with regexes over
// the text of each file: static imports and re-exports (type-only ones too) and dynamic imports.
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const src = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'src');

const IMPORTS = [
  /^\s*(?:import|export)\s[^;'"]*?\bfrom\s*['"]([^'"]+)['"]/gm, // import … from, export … from (over several lines)
  /^\s*import\s*['"]([^'"]+)['"]/gm, // import './x.js'
  /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g, // import('./x.js')
];

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(p);
    return /\.(ts|mts|cjs)$/.test(e.name) && !e.name.endsWith('.d.ts') ? [p] : []; // .cjs: the flavours' CDK loaders (leaves)
  });
}

/** Module → the modules of src/ it imports (relative paths from src/). */
function importGraph(): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const file of sourceFiles(src)) {
    const text = readFileSync(file, 'utf8');
    const deps = new Set<string>();
    for (const re of IMPORTS) {
      for (const m of text.matchAll(re)) {
        const spec = m[1]!;
        if (!spec.startsWith('.')) continue;
        const target = path.resolve(path.dirname(file), spec).replace(/\.js$/, '.ts');
        if (!existsSync(target)) throw new Error(`${path.relative(src, file)}: cannot resolve '${spec}'`);
        deps.add(path.relative(src, target));
      }
    }
    graph.set(path.relative(src, file), [...deps]);
  }
  return graph;
}

/** Every cycle's modules (strongly connected components of more than one module, or a self-import). */
function cycles(graph: Map<string, string[]>): string[][] {
  let next = 0;
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const scc: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      scc.push(w);
    } while (w !== v);
    if (scc.length > 1 || graph.get(v)!.includes(v)) found.push(scc.sort());
  };
  for (const v of graph.keys()) if (!index.has(v)) visit(v);
  return found;
}

describe('imports of src/', () => {
  const graph = importGraph();

  it('reads the graph (a sanity check of the regexes)', () => {
    expect(graph.size).toBeGreaterThan(100);
    // A multi-line import, a re-export and a lazy backend import are all seen.
    expect(graph.get('plan/index.ts')).toContain('plan/types.ts');
    expect(graph.get('secrets/registry.ts')).toEqual(
      expect.arrayContaining(['secrets/store.ts', 'secrets/backends/aws.ts', 'secrets/sops/file-store.ts']),
    );
    expect(graph.get('secrets/backends/aws.ts')).toContain('secrets/store.ts');
  });

  it('has no import cycle anywhere', () => {
    expect(cycles(graph)).toEqual([]);
  });

  it('finds a cycle when there is one', () => {
    const g = new Map([
      ['a.ts', ['b.ts']],
      ['b.ts', ['c.ts']],
      ['c.ts', ['a.ts']],
      ['d.ts', ['a.ts']],
    ]);
    expect(cycles(g)).toEqual([['a.ts', 'b.ts', 'c.ts']]);
  });

  // DESIGN.md "Layers": the engine (one run of a configuration) is below every front end, and the
  // front ends do not reach into each other: cli/ parses flags and prints, agent/ schedules,
  // provider/ maps Terraform's RPCs, all over engine/ and the layers below it.
  const FORBIDDEN: [string, string[]][] = [
    ['engine/', ['cli/', 'agent/', 'provider/']],
    ['agent/', ['cli/', 'provider/']],
    ['provider/', ['cli/', 'agent/']],
  ];
  for (const [layer, above] of FORBIDDEN) {
    it(`${layer} imports nothing from ${above.join(', ')}`, () => {
      const upward = [...graph].flatMap(([from, deps]) =>
        from.startsWith(layer)
          ? deps.filter((d) => above.some((a) => d.startsWith(a))).map((d) => `${from} → ${d}`)
          : [],
      );
      expect(upward).toEqual([]);
    });
  }

  it('the CLI and the agent plan through engine/', () => {
    const uses = (file: string) => (graph.get(file) ?? []).includes('engine/run.ts');
    expect(['cli/sync-commands.ts', 'cli/drift-command.ts', 'agent/reconciler.ts'].filter((f) => !uses(f))).toEqual([]);
  });

  it('plan/ imports nothing but plan/ and model/', () => {
    const outside = [...graph].flatMap(([from, deps]) =>
      from.startsWith('plan/')
        ? deps.filter((d) => !d.startsWith('plan/') && !d.startsWith('model/')).map((d) => `${from} → ${d}`)
        : [],
    );
    expect(outside).toEqual([]);
  });
});
