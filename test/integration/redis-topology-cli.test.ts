/**
 * `poise members` and `poise proxy` through Sentinel (--sentinel +
 * --sentinel-name, a redis+sentinel:// --redis URL) and a Redis Cluster
 * (--redis-cluster): the compiled CLI against real redis-server processes.
 */
import { spawn } from 'node:child_process';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CLI, runCli } from '../helpers/cli.js';
import { until } from '../helpers/until.js';
import { echo, startProxy } from '../helpers/proxy-process.js';
import { freePort } from '../helpers/ports.js';
import { startCluster, startSentinelTopology, type ClusterTopology, type SentinelTopology } from '../helpers/redis-topology.js';

describe('poise members / proxy over Sentinel and Cluster', () => {
  let sentinel: SentinelTopology;
  let cluster: ClusterTopology;
  let backend: net.Server;
  let backendPort: number;
  beforeAll(async () => {
    [sentinel, cluster] = await Promise.all([startSentinelTopology({ replicas: 1, sentinels: 3 }), startCluster({ masters: 3 })]);
    backend = net.createServer((s) => s.on('data', (d) => s.write(`echo:${d.toString()}`)));
    await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
    backendPort = (backend.address() as net.AddressInfo).port;
  }, 60_000);
  afterAll(async () => {
    await Promise.all([sentinel?.stop(), cluster?.stop()]);
    await new Promise<void>((r) => backend?.close(() => r()));
  });
  const sentinelFlags = () => ['--sentinel', sentinel.sentinelAddresses.join(','), '--sentinel-name', sentinel.name];
  const sentinelUrl = () => `redis+sentinel://${sentinel.sentinelAddresses.join(',')}/${sentinel.name}`;
  const clusterFlags = () => ['--redis-cluster', cluster.addresses.join(',')];
  const doc = (name: string) => JSON.stringify({ cluster: name, backends: [{ id: 'a', address: `127.0.0.1:${backendPort}` }] });

  it('members writes through --sentinel and reads back through a redis+sentinel:// URL; --wait-replicas 1 succeeds, 2 exits 8', async () => {
    expect(await runCli(['members', 'apply', '-', ...sentinelFlags(), '--cluster', 's'], doc('s'))).toMatchObject({
      code: 0,
      stdout: '1\n',
    });
    const shown = await runCli(['members', 'show', '--redis', sentinelUrl(), '--cluster', 's', '--json']);
    expect(shown.code).toBe(0);
    expect(JSON.parse(shown.stdout)).toMatchObject({ version: 1, document: { cluster: 's', backends: [{ id: 'a' }] } });
    expect(await runCli(['members', 'drain', 'a', ...sentinelFlags(), '--cluster', 's', '--wait-replicas', '1'])).toMatchObject({
      code: 0,
      stdout: '2\n',
    });
    // One replica exists: WAIT 2 cannot be met. The write is stored (version 3), the exit says it is not replicated.
    const unreplicated = await runCli([
      'members',
      'undrain',
      'a',
      ...sentinelFlags(),
      '--cluster',
      's',
      '--wait-replicas',
      '2',
      '--wait-timeout',
      '100',
    ]);
    expect(unreplicated.code).toBe(8);
    expect(unreplicated.stderr).toContain(
      'waitReplicas: version 3 was written on the master but acknowledged by 1 of 2 replicas within 100 ms',
    );
    expect(JSON.parse((await runCli(['members', 'show', ...sentinelFlags(), '--cluster', 's', '--json'])).stdout).version).toBe(3);
  });

  it('members writes, shows and watches through --redis-cluster', async () => {
    expect(await runCli(['members', 'apply', '-', ...clusterFlags(), '--cluster', 'k'], doc('k'))).toMatchObject({
      code: 0,
      stdout: '1\n',
    });
    const watch = spawn(process.execPath, [CLI, 'members', 'watch', ...clusterFlags(), '--cluster', 'k', '--count', '2', '--json'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    watch.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    const exited = new Promise<number | null>((resolve) => watch.once('exit', (code) => resolve(code)));
    try {
      // Version 1 arrives from the snapshot read after SSUBSCRIBE was confirmed; only then is version 2 written.
      await until(() => out.includes('\n'), 'watch printed version 1');
      expect(await runCli(['members', 'weight', 'a', '7', ...clusterFlags(), '--cluster', 'k'])).toMatchObject({ code: 0, stdout: '2\n' });
      expect(await exited).toBe(0);
    } finally {
      watch.kill('SIGKILL');
    }
    expect(
      out
        .trim()
        .split('\n')
        .map((l) => (JSON.parse(l) as { version: number }).version),
    ).toEqual([1, 2]);
    const shown = JSON.parse((await runCli(['members', 'show', ...clusterFlags(), '--cluster', 'k', '--json'])).stdout);
    expect(shown).toMatchObject({ version: 2, document: { backends: [{ id: 'a', weight: 7 }] } });
  });

  it('usage errors name the flag (exit 2) before anything connects', async () => {
    const both = await runCli(['members', 'show', ...sentinelFlags(), ...clusterFlags(), '--cluster', 'x']);
    expect(both.code).toBe(2);
    expect(both.stderr).toContain(
      '--redis-cluster: give exactly one of --redis, --sentinel, --redis-cluster (got --sentinel and --redis-cluster)',
    );
    const noName = await runCli(['members', 'show', '--sentinel', '127.0.0.1:1', '--cluster', 'x']);
    expect(noName).toMatchObject({ code: 2 });
    expect(noName.stderr).toContain('--sentinel-name: required with --sentinel');
    const proxyBad = await runCli(['proxy', '--listen', '127.0.0.1:1', '--redis-cluster', '127.0.0.1', '--cluster', 'x']);
    expect(proxyBad.code).toBe(2);
    expect(proxyBad.stderr).toContain('--redis-cluster: element 0 "127.0.0.1": must be "host:port"');
  });

  it.each([
    ['--sentinel', () => sentinelFlags(), 'ps'],
    ['--redis-cluster', () => clusterFlags(), 'pc'],
  ])('proxy %s routes to the membership stored there', async (_name, flags, name) => {
    expect(await runCli(['members', 'apply', '-', ...flags(), '--cluster', name], doc(name))).toMatchObject({ code: 0 });
    const port = await freePort();
    const proxy = startProxy(['--listen', `127.0.0.1:${port}`, ...flags(), '--cluster', name]);
    try {
      await proxy.until((r) => r.some((x) => x['msg'] === 'proxy ready'), 'proxy ready');
      expect(await echo(port, 'ping')).toBe('echo:ping');
      expect(await proxy.stop()).toBe(0);
    } finally {
      proxy.kill();
    }
  });
});
