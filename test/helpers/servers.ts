/**
 * What the integration tests need, probed once before any of their files
 * runs (the `integration` project's vitest `globalSetup`; the unit tests
 * need none of it). A missing one fails the run at once with a message that
 * names it and says how to get it, instead of a connect error deep in some
 * test minutes later.
 *
 * What the tests use (grep test/ for dist/, 5432, 3306 and startRedis):
 * - the build in dist/ (`npm test` runs `npm run build` first): worker
 *   threads, child processes and the package tests load it;
 * - PostgreSQL on 127.0.0.1:5432, user `postgres`, database `test`, trust auth
 *   (connect() hands pg a routed socket);
 * - MariaDB on 127.0.0.1:3306, user `root`, no password (the same for mysql2);
 * - the `redis-server` binary on PATH: Redis tests start their own servers on
 *   free ports (test/helpers/redis-server.ts), never the one on 6379;
 * - the `openssl` binary, for the TLS Redis test's certificate;
 * - the `dnsmasq` binary: the DNS discovery tests start their own (test/helpers/dns-server.ts).
 */
import { spawnSync } from 'node:child_process';
import { access } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import mysql from 'mysql2/promise';
import pg from 'pg';

/** One thing the tests need, and how to tell whether it is there. */
export interface Requirement {
  readonly name: string;
  /** Resolves when present; rejects with the reason otherwise. */
  probe(): Promise<void>;
  /** What to run to get it. */
  readonly remedy: string;
}

const PROBE_TIMEOUT_MS = 3000;

/** Connects as the tests do and runs `SELECT 1`. */
export function postgres(host: string, port: number, database = 'test'): Requirement {
  return {
    name: `PostgreSQL on ${host}:${port} (user postgres, database "${database}", trust auth)`,
    remedy: `service postgresql start && su postgres -c "createdb ${database}"  (or set trust auth in pg_hba.conf)`,
    async probe() {
      const client = new pg.Client({ host, port, user: 'postgres', database, connectionTimeoutMillis: PROBE_TIMEOUT_MS });
      client.on('error', () => {});
      try {
        await client.connect();
        await client.query('SELECT 1');
      } finally {
        await client.end().catch(() => {});
      }
    },
  };
}

/** Connects as root without a password, as the tests do, and runs `SELECT 1`. */
export function mariadb(host: string, port: number): Requirement {
  return {
    name: `MariaDB on ${host}:${port} (user root, no password)`,
    remedy: 'service mariadb start',
    async probe() {
      const conn = await mysql.createConnection({ host, port, user: 'root', password: '', connectTimeout: PROBE_TIMEOUT_MS });
      try {
        await conn.query('SELECT 1');
      } finally {
        await conn.end().catch(() => {});
      }
    },
  };
}

/** A binary on PATH that answers `args` with exit code 0. */
export function binary(command: string, args: readonly string[], remedy: string): Requirement {
  return {
    name: `${command} on PATH`,
    remedy,
    async probe() {
      const r = spawnSync(command, args, { stdio: 'ignore', timeout: PROBE_TIMEOUT_MS });
      if (r.error) throw r.error;
      if (r.status !== 0) throw new Error(`\`${command} ${args.join(' ')}\` exited with ${r.status ?? r.signal}`);
    },
  };
}

/** Files of the build, relative to the repository (the package's, then the bench workspace's entry). */
export function built(files: readonly string[]): Requirement {
  return {
    name: 'the build in dist/',
    remedy: 'npm run build  (npm test and npm run test:integration run it first)',
    async probe() {
      for (const f of files) await access(fileURLToPath(new URL(`../../${f}`, import.meta.url)));
    },
  };
}

/** Everything the integration tests need on this machine. */
export const REQUIREMENTS: readonly Requirement[] = [
  built(['dist/src/index.js', 'packages/bench/dist/main.js']),
  postgres('127.0.0.1', 5432),
  mariadb('127.0.0.1', 3306),
  binary('redis-server', ['--version'], 'apt-get install -y redis-server  (the tests start their own on free ports)'),
  binary('openssl', ['version'], 'apt-get install -y openssl'),
  binary('dnsmasq', ['--version'], 'apt-get install -y dnsmasq  (the DNS discovery tests start their own on free loopback ports)'),
];

/** Probes every requirement at once; resolves with the message for the missing ones, or undefined when all are there. */
export async function missingServers(requirements: readonly Requirement[]): Promise<string | undefined> {
  const results = await Promise.allSettled(requirements.map((r) => r.probe()));
  const lines: string[] = [];
  results.forEach((result, i) => {
    if (result.status === 'fulfilled') return;
    const req = requirements[i]!;
    const reason = result.reason instanceof Error ? result.reason.message || result.reason.name : String(result.reason);
    lines.push(`  - ${req.name}: ${reason}\n    fix: ${req.remedy}`);
  });
  if (lines.length === 0) return undefined;
  return `the integration tests need these, and ${lines.length === 1 ? 'one is' : 'some are'} missing:\n${lines.join('\n')}`;
}

/** vitest globalSetup: fail fast, naming what is missing. */
export default async function setup(): Promise<void> {
  const message = await missingServers(REQUIREMENTS);
  if (message !== undefined) throw new Error(message);
}
