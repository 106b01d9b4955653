/**
 * The public surface stays small: every name (value or type) each package
 * entry exports, counted from its source with the TypeScript parser, within
 * the limits — the root entry at most 40, every subpath entry at most 30. An
 * entry exports by explicit name only (no `export *`, which would leak a
 * module's internals), so the count is exact. A unit test: it reads sources
 * and package.json, no build (test/package/entries.test.ts checks the built
 * entries as Node loads them).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import { SURFACE } from './helpers/surface.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as {
  name: string;
  exports: Record<string, string | { import: string }>;
};

/** At most this many names per entry: the root, then every subpath. */
const LIMITS = { root: 40, subpath: 30 } as const;

/** Each entry's import specifier and its source file, from package.json "exports". */
const entries = Object.entries(pkg.exports)
  .filter(([key]) => key !== './package.json')
  .map(([key, target]) => {
    const built = typeof target === 'string' ? target : target.import;
    const source = /^\.\/dist\/(src\/.+)\.js$/.exec(built)?.[1];
    if (source === undefined) throw new Error(`exports["${key}"] does not map to dist/src/*.js: ${built}`);
    return { specifier: key === '.' ? pkg.name : `${pkg.name}/${key.slice(2)}`, file: `${source}.ts` };
  });

/** The names `file` exports, in order; throws on a form that cannot be counted by reading it (`export *`). */
function exportedNames(file: string): string[] {
  const text = readFileSync(path.join(ROOT, file), 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.ES2022, false, ts.ScriptKind.TS);
  const names: string[] = [];
  for (const statement of source.statements) {
    if (ts.isExportDeclaration(statement)) {
      const clause = statement.exportClause;
      if (clause === undefined || !ts.isNamedExports(clause)) throw new Error(`${file}: \`export *\` leaks every name of its module`);
      for (const element of clause.elements) names.push(element.name.text);
      continue;
    }
    const modifiers = ts.canHaveModifiers(statement) ? ts.getModifiers(statement) : undefined;
    if (!modifiers?.some((m) => m.kind === ts.SyntaxKind.ExportKeyword)) continue;
    if (ts.isVariableStatement(statement)) {
      for (const d of statement.declarationList.declarations) if (ts.isIdentifier(d.name)) names.push(d.name.text);
    } else if (
      (ts.isFunctionDeclaration(statement) ||
        ts.isClassDeclaration(statement) ||
        ts.isInterfaceDeclaration(statement) ||
        ts.isTypeAliasDeclaration(statement) ||
        ts.isEnumDeclaration(statement)) &&
      statement.name !== undefined
    ) {
      names.push(statement.name.text);
    } else {
      throw new Error(`${file}: an export this test cannot count at ${source.getLineAndCharacterOfPosition(statement.pos).line + 1}`);
    }
  }
  return names;
}

describe('the public surface', () => {
  it('package.json exports the root and its subpaths, and no poise-lb/cli (the bench package reaches its kit by a private path)', () => {
    expect(entries.map((e) => e.specifier).sort()).toEqual(Object.keys(SURFACE).sort());
    expect(Object.keys(pkg.exports)).not.toContain('./cli');
    expect(entries.map((e) => e.file)).not.toContain('src/bench-kit.ts');
  });

  it.each(entries.map((e) => [e.specifier, e] as const))(
    '%s: at most 40 names at the root, 30 on a subpath, each named once',
    (specifier, e) => {
      const names = exportedNames(e.file);
      expect(names.length, `${specifier} exports ${names.length}: ${names.join(', ')}`).toBeLessThanOrEqual(
        specifier === pkg.name ? LIMITS.root : LIMITS.subpath,
      );
      expect(new Set(names).size).toBe(names.length);
      // The run-time names the entry test pins are among them (the two lists cannot drift apart).
      for (const value of SURFACE[specifier]!) expect(names).toContain(value);
    },
  );

  it('the counter counts: it sees every name of a known entry, values and types', () => {
    const names = exportedNames('src/redis.ts');
    expect(names.sort()).toEqual(
      [
        'FleetConnectionBudget',
        'FleetConnectionBudgetOptions',
        'FleetConnectionShares',
        'FleetRetryBudget',
        'FleetRetryBudgetOptions',
        'FleetRetryCounts',
        'FleetMembership',
        'FleetWatcher',
        'FleetWatcherOptions',
        'MembershipKeys',
        'MembershipPublisher',
        'MembershipPublisherOptions',
        'RedisClientOptions',
        'RedisConnectionOptions',
        'RedisMembership',
        'RedisMembershipOptions',
        'SnapshotOrigin',
        'StoredMembership',
      ].sort(),
    );
  });
});
