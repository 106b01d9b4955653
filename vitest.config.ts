import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // Probes PostgreSQL, MariaDB, redis-server and openssl first; fails naming what is missing.
    globalSetup: ['test/helpers/servers.ts'],
    include: ['test/**/*.test.ts', 'packages/*/test/**/*.test.ts'],
    // Worker-thread and Redis integration tests are CPU-heavy on a 2-core
    // machine; run files one at a time per fork so they do not starve each other.
    pool: 'forks',
    maxWorkers: 2,
    // Library components log through the default pino logger; keep test output readable.
    env: { POISE_LOG_LEVEL: 'silent' },
    testTimeout: 120_000,
    hookTimeout: 60_000,
  },
});
