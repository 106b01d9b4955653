/**
 * `poise proxy --redis` without a first valid membership: it waits, serving
 * nothing (not listening), and says why; or, with --require-membership, exits
 * with the reason's code. Compiled CLI against a real redis-server on a free port.
 */
import net from 'node:net';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../helpers/cli.js';
import { echo, refused, startProxy } from '../helpers/proxy-process.js';
import { freePort } from '../helpers/ports.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';

describe('poise proxy --redis before the first membership', () => {
  let redis: TestRedis;
  let admin: Redis;
  let backend: net.Server;
  let backendPort: number;
  beforeAll(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url);
    backend = net.createServer((s) => s.on('data', (d) => s.write(`echo:${d.toString()}`)));
    await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
    backendPort = (backend.address() as net.AddressInfo).port;
  });
  afterAll(async () => {
    admin?.disconnect();
    await redis?.stop();
    await new Promise<void>((r) => backend.close(() => r()));
  });

  it('nothing stored: waits without listening, logging why every interval; a write makes it ready', async () => {
    const port = await freePort();
    const proxy = startProxy(['--listen', `127.0.0.1:${port}`, '--redis', redis.url, '--cluster', 'empty', '--wait-log-interval', '100']);
    try {
      // Until Redis has answered, a waiting line may say only that (a loaded machine); then it names why.
      const named = (x: Record<string, unknown>): boolean =>
        String(x['msg']).startsWith('proxy: no membership yet') && x['code'] === 'NotFound';
      await proxy.until((r) => r.filter(named).length >= 2, 'two waiting lines naming the missing snapshot');
      expect(proxy.find('proxy: no membership yet').filter(named)[0]).toMatchObject({
        level: 40,
        code: 'NotFound',
        reason: `redis ${redis.url}: no membership stored for cluster "empty" (key poise:empty:snapshot)`,
      });
      expect(await refused(port)).toBe(true);
      const doc = JSON.stringify({ cluster: 'empty', backends: [{ id: 'a', address: `127.0.0.1:${backendPort}` }] });
      expect(await runCli(['members', 'apply', '-', '--redis', redis.url, '--cluster', 'empty'], doc)).toMatchObject({
        code: 0,
        stdout: '1\n',
      });
      await proxy.until((r) => r.some((x) => x['msg'] === 'proxy ready'), 'proxy ready');
      expect(await echo(port, 'ping')).toBe('echo:ping');
      expect(await proxy.stop()).toBe(0);
    } finally {
      proxy.kill();
    }
  });

  it('a garbage snapshot: waits naming the corrupt field; --require-membership exits 7, nothing stored exits 4', async () => {
    await admin.set(
      'poise:junk:snapshot',
      '{"version":2,"document":{"cluster":"junk","backends":[{"id":"a","address":"127.0.0.1:1","weight":0}]}}',
    );
    const port = await freePort();
    const proxy = startProxy(['--listen', `127.0.0.1:${port}`, '--redis', redis.url, '--cluster', 'junk', '--wait-log-interval', '100']);
    try {
      await proxy.until(
        (r) => r.some((x) => String(x['msg']).startsWith('proxy: no membership yet') && x['code'] === 'Corrupt'),
        'a waiting line naming the corrupt snapshot',
      );
      expect(proxy.find('proxy: no membership yet').at(-1)).toMatchObject({
        reason: 'snapshot.document.backends[0].weight: must be an integer in [1, 4294967295], got 0',
        field: 'snapshot.document.backends[0].weight',
      });
      expect(await refused(port)).toBe(true);
      expect(await proxy.stop()).toBe(0); // a clean stop while waiting
    } finally {
      proxy.kill();
    }
    const junk = await runCli([
      'proxy',
      '--listen',
      `127.0.0.1:${port}`,
      '--redis',
      redis.url,
      '--cluster',
      'junk',
      '--require-membership',
    ]);
    expect(junk.code).toBe(7);
    expect(junk.stderr).toContain(
      'poise proxy: --require-membership: no valid membership at start: snapshot.document.backends[0].weight: must be an integer in [1, 4294967295], got 0',
    );
    const none = await runCli([
      'proxy',
      '--listen',
      `127.0.0.1:${port}`,
      '--redis',
      redis.url,
      '--cluster',
      'none',
      '--require-membership',
    ]);
    expect(none.code).toBe(4);
    expect(none.stderr).toContain(
      `poise proxy: --require-membership: no valid membership at start: redis ${redis.url}: no membership stored for cluster "none"`,
    );
  });

  it('a stored membership larger than --capacity: --require-membership exits 6', async () => {
    const doc = JSON.stringify({ cluster: 'wide', backends: ['a', 'b', 'c'].map((id, i) => ({ id, address: `127.0.0.1:${7300 + i}` })) });
    expect((await runCli(['members', 'apply', '-', '--redis', redis.url, '--cluster', 'wide'], doc)).code).toBe(0);
    const port = await freePort();
    const r = await runCli([
      'proxy',
      '--listen',
      `127.0.0.1:${port}`,
      '--redis',
      redis.url,
      '--cluster',
      'wide',
      '--capacity',
      '2',
      '--require-membership',
    ]);
    expect(r.code).toBe(6);
    expect(r.stderr).toContain(
      '--require-membership: no valid membership at start: backends: 3 new backends need free slots but only 2 are free (options.capacity 2',
    );
  });
});
