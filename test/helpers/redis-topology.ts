/**
 * Starts real Redis topologies for tests: a Sentinel-managed master with
 * replicas and sentinels, and a Redis Cluster of N masters. Every process
 * started here is SIGKILLed when the test process exits (even when a test
 * fails before its afterAll); call `stop()` in afterAll anyway.
 *
 * Timeouts are kept small (down-after-milliseconds 1000, failover-timeout
 * 3000) so a failover completes in a few seconds.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from './ports.js';
import { until } from './until.js';

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/** One redis-server (or sentinel) process on a loopback port. */
export interface RedisNode {
  readonly port: number;
  /** `host:port`. */
  readonly address: string;
  /** Whether the process is running. */
  readonly running: boolean;
  /** SIGKILL (a crash); resolves when the process is gone. */
  kill(): Promise<void>;
  /** Starts the same process again (same port, same config). */
  restart(): Promise<void>;
}

function answers(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const sock = net.connect({ host: '127.0.0.1', port });
    let buf = '';
    sock.setTimeout(500, () => {
      sock.destroy();
      resolve(false);
    });
    sock.on('connect', () => sock.write('PING\r\n'));
    sock.on('data', (d) => {
      buf += d.toString();
      if (buf.includes('\r\n')) {
        sock.destroy();
        resolve(buf.startsWith('+PONG'));
      }
    });
    sock.on('error', () => resolve(false));
  });
}

function node(port: number, args: () => string[]): RedisNode & { start(): Promise<void> } {
  let child: ChildProcess | undefined;
  const start = async (): Promise<void> => {
    const c = spawn('redis-server', args(), { stdio: 'ignore' });
    live.add(c);
    c.on('exit', () => live.delete(c));
    child = c;
    await until(
      async () => {
        if (c.exitCode !== null) throw new Error(`redis-server on port ${port} exited with code ${c.exitCode}`);
        return answers(port);
      },
      `redis on port ${port} answering PING`,
      10_000,
      25,
    );
  };
  return {
    port,
    address: `127.0.0.1:${port}`,
    get running() {
      return child !== undefined && child.exitCode === null && child.signalCode === null;
    },
    start,
    restart: start,
    async kill() {
      const c = child;
      child = undefined;
      if (c === undefined || c.exitCode !== null || c.signalCode !== null) return;
      await new Promise<void>((resolve) => {
        c.once('exit', () => resolve());
        c.kill('SIGKILL');
      });
    },
  };
}

/** Runs one command on `port` and disconnects. */
export async function command(port: number, ...args: (string | number)[]): Promise<unknown> {
  const r = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
  r.on('error', () => {});
  try {
    await r.connect();
    return await r.call(String(args[0]), ...args.slice(1).map(String));
  } finally {
    r.disconnect();
  }
}

/** A master, its replicas and the sentinels that watch it. */
export interface SentinelTopology {
  /** The master name the sentinels know (`mymaster`). */
  readonly name: string;
  /** Data nodes; `nodes[0]` is the first master. */
  readonly nodes: readonly RedisNode[];
  /** Sentinel processes. */
  readonly sentinels: readonly RedisNode[];
  /** `host:port` of every sentinel, for `sentinels` options and `--sentinel`. */
  readonly sentinelAddresses: string[];
  /** The port the sentinels currently name as master (asks a running sentinel). */
  masterPort(): Promise<number>;
  /** Waits until every sentinel names a master other than `oldPort`, and that node answers ROLE master; returns its port. */
  waitForNewMaster(oldPort: number, deadlineMs?: number): Promise<number>;
  /** Waits until the master reports `n` connected replicas in sync. */
  waitForReplicas(n: number, deadlineMs?: number): Promise<void>;
  /** Kills every process and removes the temporary directory. Idempotent. */
  stop(): Promise<void>;
}

/**
 * 1 master + `replicas` replicas + `sentinels` sentinels (quorum 2), all on
 * free loopback ports, replicas in sync before it returns.
 */
export async function startSentinelTopology(
  opts: { replicas?: number; sentinels?: number; downAfterMs?: number; failoverTimeoutMs?: number } = {},
): Promise<SentinelTopology> {
  const name = 'mymaster';
  const dir = mkdtempSync(path.join(os.tmpdir(), 'poise-sentinel-'));
  const all: RedisNode[] = [];
  const stop = async (): Promise<void> => {
    await Promise.all(all.map((n) => n.kill()));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const masterPort = await freePort();
    const master = node(masterPort, () => [
      '--port',
      String(masterPort),
      '--bind',
      '127.0.0.1',
      '--save',
      '',
      '--appendonly',
      'no',
      '--dir',
      dir,
      '--dbfilename',
      `dump-${masterPort}.rdb`,
    ]);
    all.push(master);
    await master.start();
    const nodes: RedisNode[] = [master];
    for (let i = 0; i < (opts.replicas ?? 2); i++) {
      const port = await freePort();
      const replica = node(port, () => [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        dir,
        '--dbfilename',
        `dump-${port}.rdb`,
        '--replicaof',
        '127.0.0.1',
        String(masterPort),
      ]);
      all.push(replica);
      await replica.start();
      nodes.push(replica);
    }
    const sentinels: RedisNode[] = [];
    for (let i = 0; i < (opts.sentinels ?? 3); i++) {
      const port = await freePort();
      const file = path.join(dir, `sentinel-${port}.conf`);
      writeFileSync(
        file,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${dir}`,
          `sentinel monitor ${name} 127.0.0.1 ${masterPort} 2`,
          `sentinel down-after-milliseconds ${name} ${opts.downAfterMs ?? 1000}`,
          `sentinel failover-timeout ${name} ${opts.failoverTimeoutMs ?? 3000}`,
          `sentinel parallel-syncs ${name} 1`,
          '',
        ].join('\n'),
      );
      const sentinel = node(port, () => [file, '--sentinel']);
      all.push(sentinel);
      await sentinel.start();
      sentinels.push(sentinel);
    }
    const masterPortNow = async (): Promise<number> => {
      for (const s of sentinels) {
        if (!s.running) continue;
        try {
          const reply = (await command(s.port, 'SENTINEL', 'get-master-addr-by-name', name)) as [string, string] | null;
          if (reply !== null) return Number(reply[1]);
        } catch {
          // try the next sentinel
        }
      }
      throw new Error('no sentinel answered get-master-addr-by-name');
    };
    const topology: SentinelTopology = {
      name,
      nodes,
      sentinels,
      sentinelAddresses: sentinels.map((s) => s.address),
      masterPort: masterPortNow,
      async waitForNewMaster(oldPort, deadlineMs = 30_000) {
        let found = 0;
        await until(
          async () => {
            const ports = new Set<number>();
            for (const s of sentinels) {
              if (!s.running) continue;
              const reply = (await command(s.port, 'SENTINEL', 'get-master-addr-by-name', name).catch(() => null)) as
                | [string, string]
                | null;
              ports.add(reply === null ? 0 : Number(reply[1]));
            }
            const [port] = [...ports];
            if (ports.size !== 1 || port === undefined || port === 0 || port === oldPort) return false;
            const role = (await command(port, 'ROLE').catch(() => null)) as unknown[] | null;
            found = port;
            return role !== null && role[0] === 'master';
          },
          'a new master named by every sentinel',
          deadlineMs,
          100,
        );
        return found;
      },
      async waitForReplicas(n, deadlineMs = 20_000) {
        await until(
          async () => {
            const port = await masterPortNow();
            const info = String(await command(port, 'INFO', 'replication').catch(() => ''));
            const online = info.split('\n').filter((l) => /^slave\d+:.*state=online/.test(l)).length;
            return online >= n;
          },
          `${n} replicas connected and in sync`,
          deadlineMs,
          50,
        );
      },
      stop,
    };
    await topology.waitForReplicas(opts.replicas ?? 2);
    // Every sentinel must know every replica (learned from the master's INFO) before a failover can pick one.
    await until(
      async () => {
        for (const s of sentinels) {
          const replicas = (await command(s.port, 'SENTINEL', 'replicas', name).catch(() => [])) as unknown[];
          if (replicas.length < (opts.replicas ?? 2)) return false;
        }
        return true;
      },
      'sentinels know the replicas',
      20_000,
      50,
    );
    return topology;
  } catch (err) {
    await stop();
    throw err;
  }
}

/** A Redis Cluster on loopback: masters, and replicas when asked for. */
export interface ClusterTopology {
  /** Every node (masters and replicas, as `redis-cli --cluster create` assigned the roles). */
  readonly nodes: readonly RedisNode[];
  /** `host:port` of every node, for `redisCluster` options and `--redis-cluster`. */
  readonly addresses: string[];
  /** The port of the master that owns `slot` (asks a running node). */
  ownerOf(slot: number): Promise<number>;
  /** Waits until every running node names a master other than `oldPort` for `slot`, it answers ROLE master, and cluster_state is ok; returns its port. */
  waitForNewOwner(slot: number, oldPort: number, deadlineMs?: number): Promise<number>;
  /** Waits until every running replica has its master link up (`master_link_status:up`). */
  waitForReplicasInSync(deadlineMs?: number): Promise<void>;
  /** Kills every process and removes the temporary directory. Idempotent. */
  stop(): Promise<void>;
}

/** A port P free together with its cluster bus port P + 10000. */
async function clusterPort(taken: Set<number>): Promise<number> {
  for (let i = 0; i < 200; i++) {
    const port = await freePort();
    if (port + 10000 > 65535 || taken.has(port) || taken.has(port + 10000)) continue;
    const busFree = await new Promise<boolean>((resolve) => {
      const srv = net.createServer();
      srv.once('error', () => resolve(false));
      srv.listen(port + 10000, '127.0.0.1', () => srv.close(() => resolve(true)));
    });
    if (busFree) {
      taken.add(port);
      taken.add(port + 10000);
      return port;
    }
  }
  throw new Error('no free port pair (P, P + 10000) found for a cluster node');
}

/**
 * `masters` cluster-enabled redis-servers (plus `replicas` per master, joined
 * with `--cluster-replicas`) joined with `redis-cli --cluster create`;
 * resolves when the cluster state is ok on every node and every replica is
 * in sync.
 */
export async function startCluster(opts: { masters?: number; replicas?: number } = {}): Promise<ClusterTopology> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'poise-cluster-'));
  const all: RedisNode[] = [];
  const stop = async (): Promise<void> => {
    await Promise.all(all.map((n) => n.kill()));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const taken = new Set<number>();
    const replicas = opts.replicas ?? 0;
    for (let i = 0; i < (opts.masters ?? 3) * (1 + replicas); i++) {
      const port = await clusterPort(taken);
      const n = node(port, () => [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--dir',
        dir,
        '--cluster-enabled',
        'yes',
        '--cluster-config-file',
        `nodes-${port}.conf`,
        '--cluster-node-timeout',
        '2000',
        '--dbfilename',
        `dump-${port}.rdb`,
      ]);
      all.push(n);
      await n.start();
    }
    const created = spawnSync(
      'redis-cli',
      ['--cluster', 'create', ...all.map((n) => n.address), '--cluster-replicas', String(replicas), '--cluster-yes'],
      {
        encoding: 'utf8',
        timeout: 30_000,
      },
    );
    if (created.status !== 0)
      throw new Error(`redis-cli --cluster create failed (${created.status}): ${created.stdout}\n${created.stderr}`);
    await until(
      async () => {
        for (const n of all) {
          const info = String(await command(n.port, 'CLUSTER', 'INFO').catch(() => ''));
          if (!info.includes('cluster_state:ok')) return false;
        }
        return true;
      },
      'cluster_state:ok on every node',
      20_000,
      50,
    );
    const ownerSeenBy = async (port: number, slot: number): Promise<number> => {
      const slots = (await command(port, 'CLUSTER', 'SLOTS')) as [number, number, [string, number]][];
      const range = slots.find(([lo, hi]) => slot >= lo && slot <= hi);
      if (range === undefined) throw new Error(`slot ${slot} is not served`);
      return Number(range[2][1]);
    };
    const replicasInSync = async (): Promise<boolean> => {
      for (const n of all) {
        if (!n.running) continue;
        const info = String(await command(n.port, 'INFO', 'replication').catch(() => ''));
        if (info.includes('role:slave') && !info.includes('master_link_status:up')) return false;
        // The replica's side says the link is up once it has loaded the RDB; the master counts it for WAIT only
        // once it marks it online (after its first REPLCONF ACK): every master must see its replicas online.
        if (info.includes('role:master')) {
          const connected = Number(/connected_slaves:(\d+)/.exec(info)?.[1] ?? 0);
          const online = info.split('\n').filter((l) => /^slave\d+:.*state=online/.test(l)).length;
          if (online < Math.max(connected, replicas)) return false;
        }
      }
      return true;
    };
    const topology: ClusterTopology = {
      nodes: all,
      addresses: all.map((n) => n.address),
      async ownerOf(slot) {
        const n = all.find((x) => x.running);
        if (n === undefined) throw new Error('no cluster node is running');
        return ownerSeenBy(n.port, slot);
      },
      async waitForNewOwner(slot, oldPort, deadlineMs = 30_000) {
        let found = 0;
        await until(
          async () => {
            const owners = new Set<number>();
            for (const n of all) if (n.running) owners.add(await ownerSeenBy(n.port, slot).catch(() => 0));
            const [port] = [...owners];
            if (owners.size !== 1 || port === undefined || port === 0 || port === oldPort) return false;
            const role = (await command(port, 'ROLE').catch(() => null)) as unknown[] | null;
            const info = String(await command(port, 'CLUSTER', 'INFO').catch(() => ''));
            found = port;
            return role !== null && role[0] === 'master' && info.includes('cluster_state:ok');
          },
          `a new owner of slot ${slot} named by every running node`,
          deadlineMs,
          100,
        );
        return found;
      },
      async waitForReplicasInSync(deadlineMs = 20_000) {
        await until(replicasInSync, 'every replica in sync', deadlineMs, 50);
      },
      stop,
    };
    if (replicas > 0) await topology.waitForReplicasInSync();
    return topology;
  } catch (err) {
    await stop();
    throw err;
  }
}
