import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { configDefaults, defineConfig } from 'vitest/config';

/**
 * Test files of the `integration` project; every other test file is `unit`.
 * The rule (docs/testing.md): a file is integration when it imports dist/,
 * starts a worker thread or a child process, or talks to a server it did not
 * start in its own process (Redis, PostgreSQL, MariaDB); loopback servers a
 * test starts in its own process are unit. test/suite.test.ts holds every
 * unit file to that rule.
 */
export const INTEGRATION: readonly string[] = [
  'test/integration/**/*.test.ts',
  'test/package/**/*.test.ts',
  'test/docs.test.ts', // type-checks the examples against the built entries
  'test/servers.test.ts', // the probe of the local servers, against them
  'test/load/db-state.test.ts', // a reader thread against the owner's LSN writes
  'test/load/report-seqlock.test.ts', // two writer threads (dist/)
  'test/proxy/listener-tracking.test.ts', // imports dist/
  'test/bench/proxy-bare.test.ts',
  'test/cli/bench-delegate.test.ts',
  'test/cli/help.test.ts',
  'test/cli/proxy.test.ts',
  'test/cli/proxy-bands.test.ts',
  'test/cli/proxy-check.test.ts',
  'test/cli/proxy-drain.test.ts',
  'test/cli/proxy-local-errors.test.ts',
  'test/cli/proxy-descriptors.test.ts',
  'test/cli/proxy-metrics.test.ts',
  'test/cli/proxy-ready.test.ts',
  'test/cli/proxy-young-generation.test.ts',
  'test/cli/top.test.ts',
  'test/http/counters.test.ts', // a reset race between two worker threads
  'test/load/spec-ranges.test.ts',
  'test/load/table-view.test.ts',
  'test/proxy/accounting.test.ts',
  'test/proxy/workers.test.ts',
  'test/proxy/workers-admission.test.ts',
  'test/proxy/connection-limit-threads.test.ts', // real worker threads (dist/)
  'test/proxy/early-read.test.ts', // a stopped child process as a backend whose connects hang
  'test/policy/cross-process.test.ts',
  'test/runtime/clock.test.ts',
  'packages/bench/test/command.test.ts',
  'packages/bench/test/redis.test.ts',
  'packages/bench/test/stats-worker.test.ts',
  'test/discovery/kubernetes.test.ts', // openssl makes the test API server's certificates (test/helpers/kube-api.ts)
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
