import { spawn, spawnSync } from 'node:child_process';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/redis-server.js';

// The built CLI (npm test builds first).
const CLI = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));

let backend: net.Server;
let backendPort: number;

beforeAll(async () => {
  backend = net.createServer((s) => s.on('data', (d) => s.write(`echo:${d.toString()}`)));
  await new Promise<void>((r) => backend.listen(0, '127.0.0.1', r));
  backendPort = (backend.address() as net.AddressInfo).port;
});
afterAll(async () => {
  await new Promise<void>((r) => backend.close(() => r()));
});

function usage(args: string[]): { status: number | null; stderr: string } {
  const r = spawnSync(process.execPath, [CLI, 'proxy', ...args], { encoding: 'utf8' });
  return { status: r.status, stderr: r.stderr };
}

describe('poise proxy', () => {
  it.each([
    [[], '--listen: required, HOST:PORT with a port in [1, 65535], got null'],
    [['--listen', '127.0.0.1:99999', '--backend', 'a=127.0.0.1:1'], '--listen: required, HOST:PORT with a port in [1, 65535], got "127.0.0.1:99999"'],
    [['--listen', '127.0.0.1:6000'], 'membership: give exactly one of --backend, --file, --redis'],
    [['--listen', '127.0.0.1:6000', '--backend', 'a=nowhere'], '--backend #1: must be ID=HOST:PORT with a port in [1, 65535], got "a=nowhere"'],
    [['--listen', '127.0.0.1:6000', '--backend', 'a=127.0.0.1:1', '--attempts', '0'], '--attempts: must be an integer in [1, 100], got "0"'],
    [['--listen', '127.0.0.1:6000', '--backend', 'a=127.0.0.1:1', '--policy', 'fastest'], '--policy: must be one of round-robin'],
    [['--listen', '127.0.0.1:6000', '--redis', 'redis://127.0.0.1:6379'], '--cluster: required with --redis'],
    [['--bogus'], "Unknown option '--bogus'"],
  ])('refuses %j with exit 2 and names the flag', (args, message) => {
    const r = usage(args);
    expect(r.status).toBe(2);
    expect(r.stderr).toContain(message);
  });

  it('--help exits 0 and lists every flag', () => {
    const r = spawnSync(process.execPath, [CLI, 'proxy', '--help'], { encoding: 'utf8' });
    expect(r.status).toBe(0);
    for (const flag of ['--listen', '--backend', '--file', '--redis', '--cluster', '--policy', '--attempts', '--connect-timeout', '--idle-timeout']) {
      expect(r.stdout).toContain(flag);
    }
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
});
