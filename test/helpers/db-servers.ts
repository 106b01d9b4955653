/**
 * Starts extra PostgreSQL and MariaDB servers on free loopback ports for the
 * routed-pool tests, beside the machine's own on 5432 and 3306 (Debian
 * binaries: `initdb` + `postgres` run as user `postgres`, which root cannot
 * be; `mariadb-install-db` + `mariadbd --user=root`). Each lives in its own
 * temporary directory (data, unix socket, log). A missing binary or a server
 * that does not come up throws with its log: the tests fail loudly, they
 * never skip. Every server is SIGKILLed when the test process exits even if
 * a test failed before its afterAll; call `stop()` in afterAll anyway.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { appendFileSync, chmodSync, chownSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { freePort } from './ports.js';
import { selfSignedCert } from './redis-server.js';
import { until } from './until.js';

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/** A database server started by this helper. */
export interface TestDbServer {
  readonly port: number;
  /** Temporary directory holding data, socket and log. */
  readonly dir: string;
  /** PEM of the server's self-signed certificate when started with `ssl`. */
  readonly ca: string | undefined;
  /** The server dies at once as in a crash (mariadbd: SIGKILL; postgres: SIGQUIT, immediate shutdown), its open connections drop. Resolves when it exited. */
  kill(): Promise<void>;
  /** Kills it (if alive) and removes its directory. Idempotent. */
  stop(): Promise<void>;
}

/** A PostgreSQL server of this helper: it can also be started again on its data directory. */
export interface TestPgServer extends TestDbServer {
  /** Kills it (immediate shutdown) and starts it again on the same directory and port; resolves with the new handle once it answers. */
  restart(): Promise<TestPgServer>;
}

function pgBin(name: string): string {
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) throw new Error(`PostgreSQL server binaries not found under ${root} (apt-get install postgresql)`);
  const versions = readdirSync(root).sort((a, b) => Number(b) - Number(a));
  for (const v of versions) {
    const bin = path.join(root, v, 'bin', name);
    if (existsSync(bin)) return bin;
  }
  throw new Error(`${name} not found under ${root}/*/bin`);
}

function uidOf(user: string): { uid: number; gid: number } {
  const id = spawnSync('id', ['-u', user], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', user], { encoding: 'utf8' });
  if (id.status !== 0 || gid.status !== 0) throw new Error(`user "${user}" does not exist (needed to run the server)`);
  return { uid: Number(id.stdout.trim()), gid: Number(gid.stdout.trim()) };
}

async function waitFor(what: string, probe: () => Promise<void>, child: ChildProcess, log: string, deadlineMs = 30_000): Promise<void> {
  let last: unknown;
  const up = async (): Promise<boolean> => {
    if (child.exitCode !== null || child.signalCode !== null) throw new Error(`exited (${child.exitCode ?? child.signalCode})`);
    try {
      await probe();
      return true;
    } catch (err) {
      last = err;
      return false;
    }
  };
  try {
    await until(up, what, deadlineMs, 100);
  } catch (err) {
    const text = existsSync(log) ? readFileSync(log, 'utf8').slice(-2000) : '(no log)';
    throw new Error(`${what} did not come up (${String(last ?? err)}); log tail:\n${text}`);
  }
}

function launch(cmd: string, args: string[], opts: { uid?: number; gid?: number; log: string }): ChildProcess {
  const child = spawn(cmd, args, { stdio: 'ignore', uid: opts.uid, gid: opts.gid, detached: false });
  live.add(child);
  child.on('exit', () => live.delete(child));
  return child;
}

function killer(child: ChildProcess, signal: NodeJS.Signals): () => Promise<void> {
  return () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill(signal);
    });
}

/**
 * Waits for a launched server to answer `probe`, then hands out its handle;
 * a server that does not come up is killed and its directory removed.
 */
async function supervise(
  what: string,
  child: ChildProcess,
  probe: () => Promise<void>,
  at: { port: number; dir: string; log: string; ca: string | undefined },
  killSignal: NodeJS.Signals,
): Promise<TestDbServer> {
  try {
    await waitFor(what, probe, child, at.log);
  } catch (err) {
    child.kill('SIGKILL');
    rmSync(at.dir, { recursive: true, force: true });
    throw err;
  }
  const kill = killer(child, killSignal);
  return {
    port: at.port,
    dir: at.dir,
    ca: at.ca,
    kill,
    async stop() {
      await kill();
      rmSync(at.dir, { recursive: true, force: true });
    },
  };
}

/**
 * A PostgreSQL 'postgres' superuser cluster with trust auth on a free port,
 * database `postgres`. With `ssl`, the server has `ssl = on` and a fresh
 * self-signed certificate (its PEM in `ca`). `settings` are more `-c name=value`
 * server settings (after the defaults, so `max_connections` here wins over 60).
 */
export async function startPostgres(
  opts: { ssl?: boolean; settings?: Readonly<Record<string, string | number>> } = {},
): Promise<TestPgServer> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'poise-pg-'));
  const { uid, gid } = uidOf('postgres');
  chownSync(dir, uid, gid);
  const data = path.join(dir, 'data');
  const init = spawnSync(pgBin('initdb'), ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync', '-E', 'UTF8'], {
    uid,
    gid,
    encoding: 'utf8',
  });
  if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr}`);
  const port = await freePort();
  const args = serverArgs(data, port, dir);
  for (const [name, value] of Object.entries(opts.settings ?? {})) args.push('-c', `${name}=${value}`);
  let ca: string | undefined;
  if (opts.ssl) {
    const c = selfSignedCert(dir);
    chownSync(c.cert, uid, gid);
    chownSync(c.key, uid, gid);
    chmodSync(c.key, 0o600);
    ca = c.pem;
    args.push('-c', 'ssl=on', '-c', `ssl_cert_file=${c.cert}`, '-c', `ssl_key_file=${c.key}`);
    // TLS only: a plain connection is refused, so a passing query proves the upgrade.
    writeFileSync(path.join(data, 'pg_hba.conf'), 'local all all trust\nhostssl all all 127.0.0.1/32 trust\n');
  }
  return launchPostgres({ dir, port, uid, gid, args, ca });
}

/** The server flags every test cluster shares: its data, port and socket directory, loopback only, no fsync, 60 connections. */
function serverArgs(data: string, port: number, dir: string): string[] {
  return ['-D', data, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off', '-c', 'max_connections=60'];
}

/**
 * Runs `postgres` (as user postgres) with `args` on an initialised data
 * directory and waits until it answers a query over its unix socket.
 */
async function launchPostgres(at: {
  dir: string;
  port: number;
  uid: number;
  gid: number;
  args: string[];
  ca: string | undefined;
}): Promise<TestPgServer> {
  const { dir, port, uid, gid, args, ca } = at;
  const log = path.join(dir, 'server.log');
  writeFileSync(log, '');
  chownSync(log, uid, gid);
  const child = launch(pgBin('postgres'), [...args, '-c', 'logging_collector=off'], { uid, gid, log });
  const probe = async (): Promise<void> => {
    const client = new pg.Client({ host: dir, port, user: 'postgres', database: 'postgres', connectionTimeoutMillis: 1000 });
    client.on('error', () => {});
    try {
      await client.connect();
      await client.query('SELECT 1');
    } finally {
      await client.end().catch(() => {});
    }
  };
  // SIGQUIT: immediate shutdown, the postmaster and every backend exit at once
  // (their connections drop as in a crash); a SIGKILLed postmaster would orphan its backends.
  const server = await supervise(`postgres on port ${port}`, child, probe, { port, dir, log, ca }, 'SIGQUIT');
  return {
    ...server,
    async restart() {
      await server.kill();
      return launchPostgres(at);
    },
  };
}

/**
 * A streaming replica of `primary` (a {@link startPostgres} server, whose
 * default `wal_level` is `replica`) on a free port: `pg_basebackup -R` as
 * user postgres (it writes `standby.signal` and `primary_conninfo`), then a
 * hot standby. `applyDelayMs` sets `recovery_min_apply_delay` (changeable
 * later with `ALTER SYSTEM` + `pg_reload_conf()` on the replica): commits
 * replay that long after the primary made them, which is the lag a test
 * routes around. The primary gets a trust `replication` line in pg_hba (and
 * a reload) first.
 */
export async function startPgReplica(primary: TestDbServer, opts: { applyDelayMs?: number } = {}): Promise<TestPgServer> {
  const { uid, gid } = uidOf('postgres');
  const hba = path.join(primary.dir, 'data', 'pg_hba.conf');
  appendFileSync(hba, 'host replication all 127.0.0.1/32 trust\n');
  const admin = new pg.Client({ host: primary.dir, port: primary.port, user: 'postgres', database: 'postgres' });
  await admin.connect();
  try {
    await admin.query('SELECT pg_reload_conf()');
  } finally {
    await admin.end();
  }
  const dir = mkdtempSync(path.join(os.tmpdir(), 'poise-pg-replica-'));
  chownSync(dir, uid, gid);
  const data = path.join(dir, 'data');
  const backup = spawnSync(
    pgBin('pg_basebackup'),
    ['-h', '127.0.0.1', '-p', String(primary.port), '-U', 'postgres', '-D', data, '-R', '-X', 'stream', '-c', 'fast', '--no-sync'],
    { uid, gid, encoding: 'utf8' },
  );
  if (backup.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    throw new Error(`pg_basebackup failed: ${backup.stderr}`);
  }
  const port = await freePort();
  const args = serverArgs(data, port, dir);
  args.push('-c', 'hot_standby=on', '-c', `recovery_min_apply_delay=${opts.applyDelayMs ?? 0}ms`);
  return launchPostgres({ dir, port, uid, gid, args, ca: undefined });
}

/**
 * A MariaDB replica of `primary` (started with `binlog: true`): a fresh
 * server (server id 2, `read_only`) replicating from the primary's first
 * binary log over TCP as root; resolves once both replication threads run.
 */
export async function startMariadbReplica(primary: TestDbServer): Promise<TestDbServer> {
  const replica = await startMariadb({ serverId: 2 });
  const conn = await mysql.createConnection({ host: '127.0.0.1', port: replica.port, user: 'root', password: '' });
  try {
    await conn.query(
      `CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT=${primary.port}, MASTER_USER='root', MASTER_PASSWORD='', MASTER_USE_GTID=no`,
    );
    await conn.query('SET GLOBAL read_only = 1');
    await conn.query('START SLAVE');
    await until(
      async () => {
        const [rows] = (await conn.query('SHOW SLAVE STATUS')) as unknown as [Record<string, unknown>[]];
        return rows[0]?.['Slave_IO_Running'] === 'Yes' && rows[0]['Slave_SQL_Running'] === 'Yes';
      },
      `the replica on port ${replica.port} replicating`,
      30_000,
      50,
    );
  } catch (err) {
    await replica.stop();
    throw err;
  } finally {
    await conn.end().catch(() => {});
  }
  return replica;
}

/**
 * A MariaDB server on a free port (user root, no password), with its own
 * datadir and socket. With `ssl`, a fresh self-signed certificate (PEM in
 * `ca`) and `require_secure_transport`: plain TCP connections are refused.
 */
export async function startMariadb(opts: { ssl?: boolean; serverId?: number; binlog?: boolean } = {}): Promise<TestDbServer> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'poise-mariadb-'));
  const data = path.join(dir, 'data');
  const log = path.join(dir, 'error.log');
  const init = spawnSync(
    'mariadb-install-db',
    ['--no-defaults', `--datadir=${data}`, '--auth-root-authentication-method=normal', '--user=root', '--skip-test-db'],
    { encoding: 'utf8' },
  );
  if (init.error !== undefined || init.status !== 0) throw new Error(`mariadb-install-db failed: ${init.error ?? init.stdout}`);
  const port = await freePort();
  const tlsArgs: string[] = [];
  let ca: string | undefined;
  if (opts.ssl) {
    const c = selfSignedCert(dir);
    ca = c.pem;
    tlsArgs.push(`--ssl-cert=${c.cert}`, `--ssl-key=${c.key}`, '--require-secure-transport=ON');
  }
  const child = launch(
    'mariadbd',
    [
      '--no-defaults', // must come first
      ...tlsArgs,
      `--datadir=${data}`,
      `--port=${port}`,
      '--bind-address=127.0.0.1',
      `--socket=${path.join(dir, 'mysqld.sock')}`,
      `--pid-file=${path.join(dir, 'mysqld.pid')}`,
      '--user=root',
      `--server-id=${opts.serverId ?? 1}`,
      opts.binlog ? `--log-bin=${path.join(dir, 'binlog')}` : '--skip-log-bin',
      '--innodb-buffer-pool-size=16M',
      `--log-error=${log}`,
    ],
    { log },
  );
  const probe = async (): Promise<void> => {
    const conn = await mysql.createConnection({
      socketPath: path.join(dir, 'mysqld.sock'),
      user: 'root',
      password: '',
      connectTimeout: 1000,
    });
    try {
      await conn.query('SELECT 1');
    } finally {
      await conn.end().catch(() => {});
    }
  };
  return supervise(`mariadbd on port ${port}`, child, probe, { port, dir, log, ca }, 'SIGKILL');
}
