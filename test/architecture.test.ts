/**
 * The import rules of docs/architecture.md, enforced: every import and export
 * statement (type-only ones too) and every literal `import()` of every file
 * under src/, read with the TypeScript parser, goes from a folder to one it
 * may import, and a package is loaded only where its entry says so. The
 * table below is the one on that page; change both together.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const SRC = path.join(ROOT, 'src');

/**
 * Which units each unit may import, besides itself. A unit is a folder of
 * src/, or `log` (src/log.ts and src/log-rate.ts). The entry files
 * (src/index.ts, runtime.ts, ...) re-export and may import any unit.
 */
const MAY_IMPORT: Record<string, readonly string[]> = {
  core: [],
  policy: ['core'],
  load: ['core'],
  log: ['core'],
  db: ['core'],
  health: ['core', 'load', 'log', 'db'],
  runtime: ['core', 'policy', 'load', 'health', 'log', 'db'],
  admission: ['core', 'runtime'],
  membership: ['core', 'health', 'log', 'runtime'],
  budget: ['core', 'load', 'log', 'runtime', 'membership'],
  discovery: ['core', 'log', 'membership'],
  outbound: ['core', 'runtime', 'admission', 'log'],
  proxy: ['core', 'runtime', 'admission', 'log', 'outbound'],
  http: ['core', 'runtime', 'outbound'],
  'probe-server': ['core'],
  grpc: ['core', 'load', 'runtime', 'admission'],
  metrics: ['core', 'policy', 'load', 'health', 'runtime', 'admission', 'membership', 'discovery', 'proxy', 'http', 'grpc'],
  cli: ['core', 'runtime', 'admission', 'health', 'membership', 'discovery', 'outbound', 'proxy', 'metrics', 'log'],
};

/** The only files of another unit that a unit may import from it (metrics never loads the dispatcher, so never undici). */
const ONLY_THROUGH: Record<string, Record<string, readonly string[]>> = {
  metrics: { http: ['http/counters.ts'], grpc: ['grpc/counters.ts'], discovery: ['discovery/status.ts'] },
  // The document validates the runtime's resilience options with the runtime's own validators.
  membership: {
    runtime: ['runtime/retry-budget.ts', 'runtime/slow-start-options.ts', 'runtime/connection-budget-options.ts'],
  },
  // The fleet budgets feed a Balancer's shared budget and shares over membership's Redis client, keys and scripts.
  budget: {
    runtime: ['runtime/balancer.ts', 'runtime/connection-budget-options.ts'],
    load: ['load/retry-region.ts'],
    membership: ['membership/name.ts', 'membership/redis-keys.ts', 'membership/redis-script.ts', 'membership/redis-target.ts'],
  },
};

/** Where each package may be imported for its values (a type-only import loads nothing and may stand anywhere). */
const PACKAGES: Record<string, readonly string[]> = {
  '@grpc/grpc-js': ['grpc/'],
  ioredis: ['membership/redis-', 'budget/redis-'],
  piscina: ['runtime/pool.ts'],
  pino: ['log.ts', 'proxy/'],
  'prom-client': ['metrics/', 'cli/'],
  undici: ['http/'],
  yaml: ['membership/document.ts'],
};

const ENTRIES = [
  'index.ts',
  'runtime.ts',
  'redis.ts',
  'net.ts',
  'drivers.ts',
  'http.ts',
  'metrics.ts',
  'discovery.ts',
  'grpc.ts',
  'probe-server.ts',
  'bench-kit.ts',
];

interface Import {
  /** The file, relative to src/. */
  readonly from: string;
  readonly specifier: string;
  readonly typeOnly: boolean;
}

function sourceFiles(dir = SRC): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const full = path.join(dir, e.name);
    if (e.isDirectory()) return sourceFiles(full);
    return e.name.endsWith('.ts') ? [path.relative(SRC, full).split(path.sep).join('/')] : [];
  });
}

/** Every import of `file`: import and export declarations and `import('literal')` (an `import(variable)` names no module here). */
function importsOf(file: string): Import[] {
  const text = readFileSync(path.join(SRC, file), 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, true, ts.ScriptKind.TS);
  const out: Import[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && ts.isStringLiteral(node.moduleSpecifier)) {
      const clause = node.importClause;
      const typeOnly =
        clause !== undefined &&
        (clause.isTypeOnly ||
          (clause.name === undefined &&
            clause.namedBindings !== undefined &&
            ts.isNamedImports(clause.namedBindings) &&
            clause.namedBindings.elements.length > 0 &&
            clause.namedBindings.elements.every((e) => e.isTypeOnly)));
      out.push({ from: file, specifier: node.moduleSpecifier.text, typeOnly });
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier !== undefined && ts.isStringLiteral(node.moduleSpecifier)) {
      out.push({ from: file, specifier: node.moduleSpecifier.text, typeOnly: node.isTypeOnly });
    } else if (ts.isCallExpression(node) && node.expression.kind === ts.SyntaxKind.ImportKeyword) {
      const [arg] = node.arguments;
      if (arg !== undefined && ts.isStringLiteral(arg)) out.push({ from: file, specifier: arg.text, typeOnly: false });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return out;
}

/** The unit of a file relative to src/: its folder, `log`, or `entry`. */
function unitOf(file: string): string {
  if (file === 'log.ts' || file === 'log-rate.ts') return 'log';
  if (!file.includes('/')) return ENTRIES.includes(file) ? 'entry' : `unlisted file ${file}`;
  return file.slice(0, file.indexOf('/'));
}

/** The target of a relative specifier, relative to src/, with its .ts name. */
function resolve(from: string, specifier: string): string {
  return path.posix.normalize(path.posix.join(path.posix.dirname(from), specifier)).replace(/\.js$/, '.ts');
}

const files = sourceFiles();
const imports = files.flatMap(importsOf);

describe('the import rules of docs/architecture.md', () => {
  it('the table names every folder of src/, and every file of src/ belongs to a unit', () => {
    const folders = new Set(files.filter((f) => f.includes('/')).map((f) => f.slice(0, f.indexOf('/'))));
    expect([...folders].sort()).toEqual(
      Object.keys(MAY_IMPORT)
        .filter((u) => u !== 'log')
        .sort(),
    );
    expect(files.map(unitOf).filter((u) => u.startsWith('unlisted'))).toEqual([]);
  });

  it('every relative import goes to its own unit or one it may import, and through the files it may import', () => {
    const breaches: string[] = [];
    for (const i of imports) {
      if (!i.specifier.startsWith('.')) continue;
      const target = resolve(i.from, i.specifier);
      const from = unitOf(i.from);
      const to = unitOf(target);
      if (target.startsWith('..')) breaches.push(`${i.from} imports ${i.specifier}, outside src/`);
      else if (to === 'entry') breaches.push(`${i.from} imports the entry ${target}: import the source file instead`);
      else if (from === 'entry' || from === to) continue;
      else if (!MAY_IMPORT[from]?.includes(to)) breaches.push(`${i.from} (${from}) imports ${target} (${to})`);
      else if (ONLY_THROUGH[from]?.[to] !== undefined && !ONLY_THROUGH[from][to].includes(target))
        breaches.push(`${i.from} (${from}) imports ${target}; from ${to} it may import only ${ONLY_THROUGH[from][to].join(', ')}`);
    }
    expect(breaches).toEqual([]);
  });

  it('a package is imported for its values only where it belongs, and every package import is known', () => {
    const breaches: string[] = [];
    for (const i of imports) {
      if (i.specifier.startsWith('.') || i.specifier.startsWith('node:')) continue;
      const name = i.specifier.startsWith('@') ? i.specifier.split('/').slice(0, 2).join('/') : i.specifier.split('/')[0]!;
      const where = PACKAGES[name];
      if (where === undefined) breaches.push(`${i.from} imports ${i.specifier}, a package this test does not know`);
      else if (!i.typeOnly && !where.some((w) => i.from.startsWith(w))) breaches.push(`${i.from} loads ${name}`);
    }
    expect(breaches).toEqual([]);
  });

  it('the root entry reaches no package at all through its relative imports (it loads no I/O dependency)', () => {
    const seen = new Set<string>();
    const packages: string[] = [];
    const walk = (file: string): void => {
      if (seen.has(file)) return;
      seen.add(file);
      for (const i of imports.filter((x) => x.from === file)) {
        if (i.specifier.startsWith('.')) walk(resolve(file, i.specifier));
        else if (!i.typeOnly && !i.specifier.startsWith('node:')) packages.push(`${file}: ${i.specifier}`);
      }
    };
    walk('index.ts');
    expect(seen.size).toBeGreaterThan(20);
    expect(packages).toEqual([]);
  });

  it('the checker is live: it sees the imports it rules on', () => {
    expect(imports.some((i) => i.from === 'http/dispatcher.ts' && i.specifier === 'undici' && !i.typeOnly)).toBe(true);
    expect(imports.some((i) => i.from === 'membership/source.ts' && i.specifier === 'pino' && i.typeOnly)).toBe(true);
    expect(imports.filter((i) => i.from === 'index.ts').length).toBeGreaterThan(10);
  });
});
