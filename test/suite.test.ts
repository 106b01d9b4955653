/**
 * The split of the suite holds: the `integration` project is a few folders
 * (test/integration/, test/package/, packages/NAME/test/integration/), never a
 * list of files; no `unit` test file (nor a helper it imports) reaches the
 * build, starts a thread or a process, or speaks to a database or Redis
 * client of its own; every integration folder holds test files. The rule is
 * in docs/testing.md; the folders in vitest.config.ts.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { INTEGRATION } from '../vitest.config.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** What a unit test may not do, each as a pattern over its source text. */
const MARKERS: readonly [string, RegExp][] = [
  ['imports the build (dist/)', /['"`](\.\.?\/)+dist\//],
  ['starts a worker thread', /\bnew Worker\(/],
  ['starts a child process', /from ['"]node:child_process['"]/],
  ['speaks to PostgreSQL, MariaDB or Redis', /from ['"](pg|mysql2|mysql2\/promise|ioredis)['"]/],
];

/** `test/**\/*.test.ts`-style patterns of vitest.config.ts as one regular expression over repository paths. */
function matcher(patterns: readonly string[]): RegExp {
  const literal = (text: string) => text.replace(/[.+?^${}()|[\]\\]/g, '\\$&');
  const one = (p: string) =>
    p
      .split('**/')
      .map((part) => part.split('*').map(literal).join('[^/]*'))
      .join('(.*/)?');
  return new RegExp(`^(${patterns.map(one).join('|')})$`);
}

function testFiles(): string[] {
  const dirs = ['test', ...readdirSync(path.join(ROOT, 'packages')).map((p) => `packages/${p}/test`)];
  return dirs
    .filter((d) => existsSync(path.join(ROOT, d)))
    .flatMap((d) => readdirSync(path.join(ROOT, d), { recursive: true, encoding: 'utf8' }).map((f) => `${d}/${f}`))
    .filter((f) => f.endsWith('.test.ts'))
    .sort();
}

/** `file` and every test-side module it imports by a relative path (helpers, fixtures), not the sources (src/, packages/NAME/src/). */
function withLocalImports(file: string, seen = new Set<string>()): Set<string> {
  if (seen.has(file)) return seen;
  seen.add(file);
  const text = readFileSync(path.join(ROOT, file), 'utf8');
  for (const m of text.matchAll(/(?:from|import\()\s*['"](\.{1,2}\/[^'"]+)['"]/g)) {
    const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), m[1]!)).replace(/\.js$/, '.ts');
    if (/^(packages\/[^/]+\/)?src\//.test(target) || !existsSync(path.join(ROOT, target))) continue;
    withLocalImports(target, seen);
  }
  return seen;
}

describe('the unit and integration projects', () => {
  const integration = matcher(INTEGRATION);
  const files = testFiles();
  const unit = files.filter((f) => !integration.test(f));

  it('no unit test file, nor a helper it imports, needs the build, a thread, a process or a database/Redis client', () => {
    const breaches: string[] = [];
    for (const file of unit) {
      for (const module of withLocalImports(file)) {
        const text = readFileSync(path.join(ROOT, module), 'utf8');
        for (const [what, pattern] of MARKERS) {
          if (pattern.test(text))
            breaches.push(
              `${file}${module === file ? '' : ` (through ${module})`} ${what}: move it under test/integration/ (docs/testing.md)`,
            );
        }
      }
    }
    expect(breaches).toEqual([]);
    expect(unit.length).toBeGreaterThan(60);
  });

  it('the integration project is folders, not files: every entry is FOLDER/**/*.test.ts', () => {
    for (const pattern of INTEGRATION)
      expect(pattern, pattern).toMatch(/^(test|packages\/\*\/test)(\/[a-z][a-z0-9-]*)+\/\*\*\/\*\.test\.ts$/);
    expect(INTEGRATION).toContain('test/integration/**/*.test.ts');
    // Exactly the files under those folders are integration, whatever their name.
    for (const f of files)
      expect(integration.test(f), f).toBe(/^(test\/integration|test\/package|packages\/[^/]+\/test\/integration)\//.test(f));
  });

  it('every integration folder holds at least one test file', () => {
    for (const pattern of INTEGRATION)
      expect(
        files.some((f) => matcher([pattern]).test(f)),
        pattern,
      ).toBe(true);
  });

  it('the markers are live: they find the build, threads, processes or clients in most integration files', () => {
    const marked = files.filter((f) => integration.test(f) && MARKERS.some(([, p]) => p.test(readFileSync(path.join(ROOT, f), 'utf8'))));
    expect(marked.length).toBeGreaterThan(30);
  });
});
