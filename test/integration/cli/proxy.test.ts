import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../../helpers/ports.js';
import { startProxy, refused, echo } from '../../helpers/proxy-process.js';
import { until } from '../../helpers/until.js';

// The built CLI (npm test builds first).
const CLI = fileURLToPath(new URL('../../../dist/src/cli/main.js', import.meta.url));

let backend: net.Server;
let backendPort: number;

beforeAll(async () => {
  backend = net.createServer((s) => s.on('data', (d) => s.write(`echo:${d.toString()}`)));
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  backendPort = (backend.address() as net.AddressInfo).port;
});
const dir = mkdtempSync(path.join(os.tmpdir(), 'poise-proxy-'));
afterAll(async () => {
  await new Promise<void>((r) => backend.close(() => r()));
  rmSync(dir, { recursive: true, force: true });
});

function usage(args: string[]): { status: number | null; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, 'proxy', ...args], { encoding: 'utf8' });
  return { status: r.status, stderr: r.stderr };
}

describe('poise proxy', () => {
  it.each([
    [[], '--listen: required, HOST:PORT with a port in [1, 65535], got null'],
    [
      ['--listen', '127.0.0.1:99999', '--backend', 'a=127.0.0.1:1'],
      '--listen: required, HOST:PORT with a port in [1, 65535], got "127.0.0.1:99999"',
    ],
    [['--listen', '127.0.0.1:6000'], 'membership: give exactly one of --backend, --file, --redis'],
    [
      ['--listen', '127.0.0.1:6000', '--backend', 'a=nowhere'],
      '--backend #1: must be [ID=]HOST:PORT with a port in [1, 65535], got "a=nowhere"',
    ],
    [
      ['--listen', '127.0.0.1:6000', '--backend', 'a=127.0.0.1:1', '--attempts', '0'],
      '--attempts: must be an integer in [1, 100], got "0"',
    ],
    [['--listen', '127.0.0.1:6000', '--backend', 'a=127.0.0.1:1', '--policy', 'fastest'], '--policy: must be one of round-robin'],
    [['--listen', '127.0.0.1:6000', '--redis', 'redis://127.0.0.1:6379'], '--cluster: required with --redis'],
    [
      ['--listen', '127.0.0.1:6000', '--file', 'a.json', '--discover', 'dns:a.test:80'],
      '--discover: not with --file (one membership source; --discover takes --redis only, for fleet mode)',
    ],
    [
      ['--listen', '127.0.0.1:6000', '--backend', 'a=127.0.0.1:1', '--redis', 'redis://127.0.0.1:6379', '--cluster', 'c'],
      '--redis: not with --backend',
    ],
    [
      ['--listen', '127.0.0.1:6000', '--discover', 'dns:a.test:80', '--redis', 'redis://127.0.0.1:6379'],
      '--cluster: required with --redis',
    ],
    [['--listen', '127.0.0.1:6000', '--backend', 'a=127.0.0.1:1', '--watcher-lease', '1s'], '--watcher-lease: only in fleet mode'],
    [
      [
        '--listen',
        '127.0.0.1:6000',
        '--discover',
        'dns:a.test:80',
        '--redis-cluster',
        '127.0.0.1:7000',
        '--cluster',
        'c',
        '--watcher-lease',
        '50ms',
      ],
      '--watcher-lease: must be a duration in [100ms, 10m]',
    ],
    [
      ['--listen', '127.0.0.1:6000', '--backend', 'a=127.0.0.1:1', '--timeout-client', '30 s'],
      '--timeout-client: must be a duration in [0ms, 24h]',
    ],
    [
      ['--listen', '127.0.0.1:6000', '--backend', 'a=127.0.0.1:1', '--timeout-connect', '0'],
      '--timeout-connect: must be a duration in [1ms, 10m]',
    ],
    [
      ['--listen', '127.0.0.1:6000', '--backend', 'a=127.0.0.1:1', '--key', 'client-ip'],
      '--key: only with a keyed --policy (rendezvous, maglev, maglev:bounded, ring-hash, ring-hash:bounded), got --policy p2c:latency',
    ],
    [
      ['--listen', '127.0.0.1:6000', '--backend', 'a=127.0.0.1:1', '--policy', 'maglev', '--key', 'ip'],
      '--key: must be one of client-ip, client-ip:port, got "ip"',
    ],
    [
      ['--listen', '127.0.0.1:6000', '--backend', 'a=127.0.0.1:1', '--send-proxy', '--send-proxy-v2'],
      '--send-proxy-v2: give one of --send-proxy and --send-proxy-v2',
    ],
    [
      ['--listen', '127.0.0.1:6000', '--backend', 'a=127.0.0.1:1', '--accept-proxy-timeout', '1s'],
      '--accept-proxy-timeout and --accept-proxy-max-bytes need --accept-proxy',
    ],
    [
      ['--listen', '127.0.0.1:6000', '--backend', 'a=127.0.0.1:1', '--accept-proxy', '--accept-proxy-max-bytes', '27'],
      '--accept-proxy-max-bytes: must be an integer in [28, 65551], got "27"',
    ],
    [['--listen', '127.0.0.1:6000', '--backend', 'a=127.0.0.1:1', '--workers', '65'], '--workers: must be an integer in [0, 64], got "65"'],
    [
      ['--listen', '127.0.0.1:6000', '--backend', 'a=127.0.0.1:1', '--max-connections', '-1'],
      '--max-connections: must be an integer in [0, 1048575], got "-1"',
    ],
    [['--listen', '127.0.0.1:6000', '--backend', 'a=127.0.0.1:1', '--grace', '30 s'], '--grace: must be a duration in [0ms, 24h]'],
    [
      ['--bogus'],
      'unknown flag --bogus (accepted: --listen, --backend, --file, --redis, --sentinel, --sentinel-name, --redis-cluster, --discover, --dns-server, --cluster, --prefix, --policy, --attempts, ',
    ],
    [['--listen'], '--listen: needs a value'],
    [['--listen', '127.0.0.1:6000', '--file', 'a.json', '--file', 'b.json'], '--file: given more than once'],
    [['--listen', '127.0.0.1:6000', 'extra'], 'unexpected argument "extra" (this command takes flags only)'],
  ])('refuses %j with exit 2 and names the flag', (args, message) => {
    const r = usage(args);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(message);
  });

  it('--help exits 0 and lists every flag', () => {
    const r = spawnSync(process.execPath, [CLI, 'proxy', '--help'], { encoding: 'utf8' });
    expect(r.status).toBe(0);
    const flags = [
      '--listen',
      '--backend',
      '--file',
      '--redis',
      '--cluster',
      '--policy',
      '--attempts',
      '--timeout-connect',
      '--timeout-client',
      '--timeout-server',
    ];
    flags.push('--workers', '--max-connections', '--grace');
    flags.push(
      '--key',
      '--send-proxy',
      '--send-proxy-v2',
      '--accept-proxy',
      '--accept-proxy-timeout',
      '--accept-proxy-max-bytes',
      '--access-log',
    );
    for (const flag of flags) expect(r.stdout).toContain(flag);
    expect(r.stdout).toContain('(default p2c:latency');
    expect(r.stdout).toContain('(default 30s)');
  });

  it('proxies real TCP traffic and stops cleanly with exit 0 on SIGTERM', async () => {
    const port = await freePort();
    const child = spawn(process.execPath, [CLI, 'proxy', '--listen', `127.0.0.1:${port}`, '--backend', `a=127.0.0.1:${backendPort}`], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, POISE_LOG_LEVEL: 'info' },
    });
    let log = '';
    // Wait for the 'proxy ready' log line instead of sleeping.
    await new Promise<void>((resolve, reject) => {
      child.stderr.on('data', (d: Buffer) => {
        log += d.toString();
        if (log.includes('proxy ready')) resolve();
      });
      child.once('exit', (code) => reject(new Error(`proxy exited early with ${code}: ${log}`)));
    });
    const reply = await new Promise<string>((resolve, reject) => {
      const s = net.connect({ host: '127.0.0.1', port }, () => s.write('ping'));
      s.once('data', (d) => {
        resolve(d.toString());
        s.end();
      });
      s.once('error', reject);
    });
    expect(reply).toBe('echo:ping');
    const exit = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    child.kill('SIGTERM');
    expect(await exit).toBe(0);
    expect(log).toContain('proxy stopping');
  });

  it('wires the connection flags: --send-proxy reaches the backend, --timeout-client closes an idle client, --access-log writes JSON to stdout', async () => {
    const headers: string[] = [];
    const pp = net.createServer((s) => {
      s.once('data', (d) => headers.push(d.toString('latin1')));
      s.on('error', () => s.destroy());
    });
    await new Promise<void>((r) => pp.listen(0, '127.0.0.1', r));
    const ppPort = (pp.address() as net.AddressInfo).port;
    const port = await freePort();
    const args = [
      'proxy',
      '--listen',
      `127.0.0.1:${port}`,
      '--backend',
      `a=127.0.0.1:${ppPort}`,
      '--send-proxy',
      '--timeout-client',
      '200ms',
      '--access-log',
    ];
    const child = spawn(process.execPath, [CLI, ...args], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, POISE_LOG_LEVEL: 'info' },
    });
    let log = '';
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
    await new Promise<void>((resolve, reject) => {
      child.stderr.on('data', (d: Buffer) => {
        log += d.toString();
        if (log.includes('proxy ready')) resolve();
      });
      child.once('exit', (code) => reject(new Error(`proxy exited early with ${code}: ${log}`)));
    });
    const s = net.connect({ host: '127.0.0.1', port });
    const local = await new Promise<number>((r) => s.once('connect', () => r(s.localPort!)));
    s.resume();
    await new Promise<void>((r) => s.once('close', () => r()));
    await until(() => out.includes('\n'), 'the access log record on stdout', 10_000);
    const record = JSON.parse(out.split('\n')[0]!) as Record<string, unknown>;
    expect(record).toMatchObject({
      msg: 'connection',
      client: `127.0.0.1:${local}`,
      backend: 'a',
      termination: 'client-timeout',
      state: 'cD',
      bytesIn: 0,
    });
    expect(headers).toEqual([`PROXY TCP4 127.0.0.1 127.0.0.1 ${local} ${port}\r\n`]);
    const exit = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
    child.kill('SIGTERM');
    expect(await exit).toBe(0);
    await new Promise<void>((r) => pp.close(() => r()));
  });

  const L = ['--listen', '127.0.0.1:6000'];
  it.each([
    [
      'duplicate --backend ids',
      [...L, '--backend', 'a=127.0.0.1:1', '--backend', 'a=127.0.0.1:2'],
      3,
      'poise proxy: --backend[1].id: duplicate id "a" (first at --backend[0])',
    ],
    [
      'a 300-character id',
      [...L, '--backend', `${'i'.repeat(300)}=127.0.0.1:1`],
      3,
      'poise proxy: --backend[0].id: must be a string of 1 to 256 characters, got "iii',
    ],
    [
      'a bad backend host',
      [...L, '--backend', 'a=999.999.999.999:80'],
      3,
      'poise proxy: --backend[0].address: must be "host:port" with a port in [1, 65535] (IPv6 as "[::1]:port"); "999.999.999.999" is not an IPv4 address',
    ],
    [
      'a URL as a backend address',
      [...L, '--backend', 'a=http://127.0.0.1:7001'],
      3,
      'poise proxy: --backend[0].address: must be "host:port" with a port in [1, 65535] (IPv6 as "[::1]:port"); "http://" is a URL scheme: give HOST:PORT without it ("127.0.0.1:7001"), got "http://127.0.0.1:7001"',
    ],
    [
      'more backends than --capacity',
      [...L, '--capacity', '2', '--backend', 'a=127.0.0.1:1', '--backend', 'b=127.0.0.1:2', '--backend', 'c=127.0.0.1:3'],
      6,
      'poise proxy: --backend: 3 backends given, more than --capacity 2',
    ],
    [
      '--log-level loud',
      [...L, '--backend', 'a=127.0.0.1:1', '--log-level', 'loud'],
      2,
      'poise proxy: --log-level: must be one of fatal, error, warn, info, debug, trace, silent, got "loud"',
    ],
    [
      '--cluster a:b',
      [...L, '--redis', 'redis://127.0.0.1:1', '--cluster', 'a:b'],
      2,
      'poise proxy: --cluster: must be 1 to 128 characters of [A-Za-z0-9._-], starting with a letter or digit, got "a:b"',
    ],
    [
      '--listen with a bad host',
      ['--listen=-:6000', '--backend', 'a=127.0.0.1:1'],
      2,
      'poise proxy: --listen: required, HOST:PORT with a port in [1, 65535], got "-:6000" (host "-" has the label "-"',
    ],
    [
      '--file /dev/zero --require-membership',
      [...L, '--file', '/dev/zero', '--require-membership'],
      3,
      'poise proxy: input.file: "/dev/zero" exceeds the limit of 1048576 bytes',
    ],
    [
      'a missing --file with --require-membership',
      [...L, '--file', '/nonexistent/poise.json', '--require-membership'],
      4,
      'poise proxy: input.file: cannot read "/nonexistent/poise.json": ENOENT',
    ],
    [
      'a --file in a missing directory (a wait that could never end)',
      [...L, '--file', '/nonexistent/poise.json'],
      4,
      'poise proxy: input.file: cannot watch the directory "/nonexistent": ENOENT',
    ],
  ])('%s exits with the code of the README table', (_name, args, code, message) => {
    const r = usage(args as string[]);
    expect(r.stderr).toContain(message);
    expect(r.status).toBe(code);
  });

  it('an invalid --file with --require-membership exits 3 naming the field; Redis down with it exits 1', async () => {
    const file = path.join(dir, 'bad.json');
    writeFileSync(file, JSON.stringify({ cluster: 'p', backends: [{ id: 'a', address: '127.0.0.1:1', weight: 0 }] }));
    const bad = usage([...L, '--file', file, '--require-membership']);
    expect([bad.status, bad.stderr.trim()]).toEqual([3, 'poise proxy: backends[0].weight: must be an integer in [1, 4294967295], got 0']);
    const port = await freePort();
    const down = usage([...L, '--redis', `redis://127.0.0.1:${port}`, '--cluster', 'p', '--require-membership']);
    expect(down.status).toBe(1);
    expect(down.stderr).toContain(
      `poise proxy: redis redis://127.0.0.1:${port}: unavailable at start (connect ECONNREFUSED 127.0.0.1:${port})`,
    );
  });

  it('an invalid --file: waits without listening, says why every interval, and serves once the file is valid', async () => {
    const file = path.join(dir, 'later.json');
    writeFileSync(file, JSON.stringify({ cluster: 'p', backends: [{ id: 'a', address: `127.0.0.1:${backendPort}`, weight: -1 }] }));
    const port = await freePort();
    const proxy = startProxy(['--listen', `127.0.0.1:${port}`, '--file', file, '--wait-log-interval', '100']);
    try {
      // Under load the first interval may pass before the file is read ("has not answered yet"): wait for two lines that name the reason.
      await proxy.until(
        (r) => r.filter((x) => String(x['msg']).startsWith('proxy: no membership yet') && x['code'] === 'InvalidWeight').length >= 2,
        'two waiting lines naming the reason',
      );
      const waiting = proxy.find('proxy: no membership yet').filter((x) => x['code'] !== undefined);
      expect(waiting[0]).toMatchObject({
        level: 40,
        reason: 'backends[0].weight: must be an integer in [1, 4294967295], got -1',
        code: 'InvalidWeight',
        field: 'backends[0].weight',
      });
      expect(await refused(port)).toBe(true); // not listening: refused, never accepted and reset
      expect(proxy.find('proxy ready')).toHaveLength(0);
      writeFileSync(file, JSON.stringify({ cluster: 'p', backends: [{ id: 'a', address: `127.0.0.1:${backendPort}` }] }));
      await proxy.until((r) => r.some((x) => x['msg'] === 'proxy ready'), 'proxy ready');
      expect(await echo(port, 'hi')).toBe('echo:hi');
      expect(await proxy.stop()).toBe(0);
    } finally {
      proxy.kill();
    }
  });

  it('--help says what happens without a membership', () => {
    const r = spawnSync(process.execPath, [CLI, 'proxy', '--help'], { encoding: 'utf8' });
    expect(r.stdout).toContain('does NOT listen: clients are refused, never accepted and reset');
    expect(r.stdout).toContain('--require-membership');
    expect(r.stdout).toContain('exit codes: 0 ok, 1 runtime failure');
  });
});
