/**
 * The graph walk behind a module graph loaded one file at a time
 * (src/core/ordered-import.ts): which declarations of compiled JavaScript it
 * follows, and that its order is ECMAScript's evaluation order (depth-first
 * post-order in source order) with the modules on an import cycle left to
 * the loader. That `poise proxy` then starts under `ulimit -n 64`, and that a
 * real graph evaluates in the native order: test/integration/cli/proxy-descriptors.test.ts.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { importOrder, staticImports } from '../../src/core/ordered-import.js';

describe('staticImports', () => {
  it.each<[string, string, string[]]>([
    ['named', "import { a, b } from './a.js';", ['./a.js']],
    ['default and namespace', "import x from '../x.js';\nimport * as ns from './ns.js';", ['../x.js', './ns.js']],
    ['default with named', "import x, { y as z } from './xy.js';", ['./xy.js']],
    ['side effect, double quotes', 'import "./side.js";', ['./side.js']],
    ['empty bindings (a type-only import under verbatimModuleSyntax)', "import {} from './types.js';", ['./types.js']],
    ['multi-line', "import {\n  a,\n  b,\n} from './multi.js';", ['./multi.js']],
    ['re-exports', "export { a } from './a.js';\nexport * from './b.js';\nexport * as c from './c.js';", ['./a.js', './b.js', './c.js']],
    ['.mjs, no semicolon, trailing comment', "import { a } from './a.mjs' // why", ['./a.mjs']],
    ['packages and builtins are the loader’s', "import pino from 'pino';\nimport { readFileSync } from 'node:fs';", []],
    [
      'dynamic import and import.meta are not static',
      "const m = await import('./lazy.js');\nconst u = new URL('./w.js', import.meta.url);",
      [],
    ],
    ['inside a comment', "/**\n * import { a } from './doc.js';\n */\n// import './line.js';", []],
    ['a JSON module with attributes', "import pkg from '../package.json' with { type: 'json' };", []],
    ['an export without a source', "export { a, b };\nexport const c = './c.js';\nexport default './d.js';", []],
    ['indented (not a top-level declaration)', "  import './nested.js';", []],
  ])('%s', (_name, source, expected) => {
    expect(staticImports(source)).toEqual(expected);
  });
});

/** A graph of modules m0..m(n-1) at file:///g/: each module's source imports the listed ones in order. */
function graphOf(edges: number[][]): Map<string, string> {
  return new Map(edges.map((deps, i) => [`file:///g/m${i}.js`, deps.map((d) => `import './m${d}.js';`).join('\n')]));
}

/**
 * ECMAScript's evaluation order of the graph under m0 (InnerModuleEvaluation,
 * reduced to what fixes the order): depth first in source order, a module
 * after its dependencies, a dependency already on the stack (a cycle) skipped.
 */
function evaluationOrder(edges: number[][]): number[] {
  const out: number[] = [];
  const seen = new Set<number>();
  const visit = (m: number): void => {
    seen.add(m);
    for (const d of edges[m]!) if (!seen.has(d)) visit(d);
    out.push(m);
  };
  visit(0);
  return out;
}

/**
 * What importing `order` one module at a time evaluates, in order: each
 * import evaluates, in ECMAScript's order, its graph's modules not evaluated yet.
 */
function evaluatedBy(order: number[], edges: number[][]): number[] {
  const out: number[] = [];
  const done = new Set<number>();
  for (const root of order) {
    const seen = new Set<number>(done);
    const visit = (m: number): void => {
      seen.add(m);
      for (const d of edges[m]!) if (!seen.has(d)) visit(d);
      out.push(m);
      done.add(m);
    };
    if (!seen.has(root)) visit(root);
  }
  return out;
}

const index = (url: string): number => Number(url.slice('file:///g/m'.length, -'.js'.length));

describe('importOrder', () => {
  it('is depth-first post-order in source order, the entry last, each module once', () => {
    // m0 → m1, m2; m1 → m3; m2 → m3, m4 (a diamond over m3).
    const files = graphOf([[1, 2], [3], [3, 4], [], []]);
    expect(importOrder('file:///g/m0.js', (u) => files.get(u)).map(index)).toEqual([3, 1, 4, 2, 0]);
  });

  it('imports a cycle through its first module, and leaves a module that cannot be read (and what follows it) to a later import', () => {
    // m0 → m1 → m2 → m1 (a cycle entered at m1), m0 → m3 (missing), m0 → m4.
    const files = graphOf([[1, 3, 4], [2], [1], [], []]);
    files.delete('file:///g/m3.js');
    // m2 alone would evaluate m1 first; m1 evaluates m2 then itself, as the native order does.
    expect(importOrder('file:///g/m0.js', (u) => files.get(u)).map(index)).toEqual([1, 0]);
  });

  it('a module after a cycle in the order waits for the import that evaluates the cycle', () => {
    // m0 → m4 → m5 → m0 (a cycle through the entry), m4 → m1: native order m5, m1, m4, m0.
    const files = graphOf([[4], [], [], [], [5, 1], [0]]);
    expect(importOrder('file:///g/m0.js', (u) => files.get(u)).map(index)).toEqual([0]);
  });

  it('resolves specifiers against the importing module', () => {
    const files = new Map([
      ['file:///a/cli/main.js', "import { x } from '../core/x.js';\nimport './local.js';"],
      ['file:///a/core/x.js', "import './y.js';"],
      ['file:///a/core/y.js', ''],
      ['file:///a/cli/local.js', ''],
    ]);
    expect(importOrder('file:///a/cli/main.js', (u) => files.get(u))).toEqual([
      'file:///a/core/y.js',
      'file:///a/core/x.js',
      'file:///a/cli/local.js',
      'file:///a/cli/main.js',
    ]);
  });

  it('law: importing its order one module at a time evaluates every graph, cycles included, in the native order', () => {
    // Random graphs of up to 12 modules, each importing up to 4 others (back edges make cycles).
    const graph = fc
      .integer({ min: 1, max: 12 })
      .chain((n) => fc.array(fc.array(fc.nat(n - 1), { maxLength: 4 }), { minLength: n, maxLength: n }));
    fc.assert(
      fc.property(graph, (edges) => {
        const files = graphOf(edges);
        const order = importOrder('file:///g/m0.js', (u) => files.get(u)).map(index);
        expect(evaluatedBy(order, edges)).toEqual(evaluationOrder(edges));
      }),
      { numRuns: 2000, seed: 35 },
    );
  });

  it('law: without a cycle every module is imported alone, one new file per import', () => {
    // Each module imports only modules of a higher number: no cycle.
    const graph = fc
      .integer({ min: 1, max: 12 })
      .chain((n) => fc.tuple(...Array.from({ length: n }, (_, i) => fc.array(fc.integer({ min: i + 1, max: n }), { maxLength: 4 }))));
    fc.assert(
      fc.property(graph, (raw) => {
        const n = raw.length;
        const edges = raw.map((deps) => deps.filter((d) => d < n));
        const files = graphOf(edges);
        expect(importOrder('file:///g/m0.js', (u) => files.get(u)).map(index)).toEqual(evaluationOrder(edges));
      }),
      { numRuns: 1000, seed: 35 },
    );
  });
});
