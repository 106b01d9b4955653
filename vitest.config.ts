import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { configDefaults, defineConfig } from 'vitest/config';

/**
 * The folders of the `integration` project; every other test file is `unit`.
 * The rule (docs/testing.md): a file is integration when it imports dist/,
 * starts a worker thread or a child process, or talks to a server it did not
 * start in its own process (Redis, PostgreSQL, MariaDB); loopback servers a
 * test starts in its own process are unit. Such a file lives under
 * test/integration/ (mirroring src/'s folders where it tests one), the
 * package's own tests (build, pack, entries) under test/package/, and a
 * workspace package's under packages/NAME/test/integration/.
 * test/suite.test.ts holds every unit file to that rule.
 */
export const INTEGRATION: readonly string[] = [
  'test/integration/**/*.test.ts',
  'test/package/**/*.test.ts',
  'packages/*/test/integration/**/*.test.ts',
];

const TESTS = ['test/**/*.test.ts', 'packages/*/test/**/*.test.ts'];

/**
 * The package's entries (`poise-lb`, `poise-lb/runtime`, ...) resolved to
 * their sources instead of dist/, read from package.json's exports: what the
 * bench package imports works in a unit run without a build.
 */
function entriesToSources(): { find: RegExp; replacement: string }[] {
  const pkg = JSON.parse(readFileSync(new URL('./package.json', import.meta.url), 'utf8')) as {
    name: string;
    exports: Record<string, string | { import?: string }>;
  };
  return Object.entries(pkg.exports).flatMap(([key, target]) => {
    const built = typeof target === 'string' ? target : target.import;
    const source = built?.match(/^\.\/dist\/(src\/.+)\.js$/)?.[1];
    if (source === undefined) return [];
    const name = pkg.name + key.slice(1);
    return [
      { find: new RegExp(`^${name.replace(/[/.]/g, '\\$&')}$`), replacement: fileURLToPath(new URL(`./${source}.ts`, import.meta.url)) },
    ];
  });
}

/** The bench package's private path into the build (packages/bench/src/kit.ts), resolved to its source likewise. */
const BENCH_KIT = {
  find: /^\.\.\/\.\.\/\.\.\/dist\/src\/bench-kit\.js$/,
  replacement: fileURLToPath(new URL('./src/bench-kit.ts', import.meta.url)),
};

export default defineConfig({
  test: {
    pool: 'forks',
    // Library components log through the default pino logger; keep test output readable.
    env: { POISE_LOG_LEVEL: 'silent' },
    testTimeout: 120_000,
    hookTimeout: 60_000,
    projects: [
      {
        extends: true,
        resolve: { alias: [...entriesToSources(), BENCH_KIT] },
        test: {
          name: 'unit',
          include: TESTS,
          exclude: [...configDefaults.exclude, ...INTEGRATION],
          // A fork per core, each running file after file without a fresh module graph (isolate: false): starting a
          // fork and importing the sources again for each of ~80 small files cost three quarters of the time. A unit
          // test therefore leaves no process-wide state behind (docs/testing.md). The unit files run first.
          maxWorkers: '100%',
          isolate: false,
          sequence: { groupOrder: 0 },
        },
      },
      {
        extends: true,
        test: {
          name: 'integration',
          include: [...INTEGRATION],
          // Worker-thread, child-process and Redis tests are CPU-heavy: two files at a time so they do not starve
          // each other on a 2-core machine; they run after the unit files.
          maxWorkers: 2,
          sequence: { groupOrder: 1 },
          // Probes the build, PostgreSQL, MariaDB, redis-server and openssl first; fails naming what is missing.
          globalSetup: ['test/helpers/servers.ts'],
        },
      },
    ],
  },
});
