/**
 * Benchmark plumbing for PostgreSQL: a private primary and a streaming
 * replica on free loopback ports, run as the `postgres` user from the
 * binaries `pg_config --bindir` names, killed when the benchmark exits.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { appendFileSync, chownSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from './redis.js';

/** A server this module started. */
export interface OwnPostgres {
  port: number;
  dir: string;
  child: ChildProcess;
  /** Immediate shutdown (SIGQUIT) and its directory removed. */
  stop(): Promise<void>;
}

function postgresUser(): { uid: number; gid: number } {
  const id = (flag: string): number => Number(spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' }).stdout.trim());
  return { uid: id('-u'), gid: id('-g') };
}

function bin(name: string): string {
  const dir = spawnSync('pg_config', ['--bindir'], { encoding: 'utf8' }).stdout.trim();
  return path.join(dir, name);
}

function run(name: string, args: string[], who: { uid: number; gid: number }): void {
  const r = spawnSync(bin(name), args, { ...who, encoding: 'utf8' });
  if (r.status !== 0) throw new Error(`${name} failed: ${r.stderr || r.error}`);
}

async function serve(dir: string, data: string, settings: Record<string, string>, who: { uid: number; gid: number }): Promise<OwnPostgres> {
  const port = await freePort();
  const args = ['-D', data, '-p', String(port), '-k', dir, '-c', 'listen_addresses=127.0.0.1', '-c', 'fsync=off'];
  for (const [k, v] of Object.entries(settings)) args.push('-c', `${k}=${v}`);
  const child = spawn(bin('postgres'), args, { ...who, stdio: 'ignore' });
  process.on('exit', () => child.kill('SIGKILL'));
  for (let i = 0; ; i++) {
    const c = new pg.Client({ host: dir, port, user: 'postgres', database: 'postgres' });
    c.on('error', () => {});
    try {
      await c.connect();
      await c.query('SELECT 1');
      await c.end();
      break;
    } catch (err) {
      await c.end().catch(() => {});
      if (i > 300 || child.exitCode !== null) throw new Error(`postgres on ${port} did not start: ${String(err)}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return {
    port,
    dir,
    child,
    stop: () =>
      new Promise<void>((resolve) => {
        const done = (): void => {
          rmSync(dir, { recursive: true, force: true });
          resolve();
        };
        if (child.exitCode !== null || child.signalCode !== null) return done();
        child.once('exit', done);
        child.kill('SIGQUIT');
      }),
  };
}

function ownDir(prefix: string, who: { uid: number; gid: number }): { dir: string; data: string } {
  const dir = mkdtempSync(path.join(os.tmpdir(), prefix));
  chownSync(dir, who.uid, who.gid);
  return { dir, data: path.join(dir, 'data') };
}

/** A primary (trust auth, replication allowed from 127.0.0.1). */
export async function ownPrimary(): Promise<OwnPostgres> {
  const who = postgresUser();
  const { dir, data } = ownDir('poise-bench-pg-', who);
  run('initdb', ['-D', data, '-A', 'trust', '-U', 'postgres', '--no-sync'], who);
  appendFileSync(path.join(data, 'pg_hba.conf'), 'host replication all 127.0.0.1/32 trust\n');
  return serve(dir, data, { wal_level: 'replica', max_wal_senders: '5', max_connections: '100' }, who);
}

/** A streaming replica of `primary` that replays every commit `applyDelayMs` late. */
export async function ownReplica(primary: OwnPostgres, applyDelayMs: number): Promise<OwnPostgres> {
  const who = postgresUser();
  const { dir, data } = ownDir('poise-bench-pg-replica-', who);
  run(
    'pg_basebackup',
    ['-h', '127.0.0.1', '-p', String(primary.port), '-U', 'postgres', '-D', data, '-R', '-X', 'stream', '-c', 'fast'],
    who,
  );
  return serve(dir, data, { hot_standby: 'on', recovery_min_apply_delay: `${applyDelayMs}ms`, max_connections: '100' }, who);
}
