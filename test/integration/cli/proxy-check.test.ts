// `poise proxy --check`: flag validation, and a real active check in the proxy process.
import { spawn, spawnSync } from 'node:child_process';
import net from 'node:net';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { freePort } from '../../helpers/ports.js';

const CLI = fileURLToPath(new URL('../../../dist/src/cli/main.js', import.meta.url));
const L = ['--listen', '127.0.0.1:6000', '--backend', 'a=127.0.0.1:1'];

describe('poise proxy --check', () => {
  it.each([
    [[...L, '--check', 'icmp'], '--check: must be one of tcp, http:/PATH, redis, postgres, got "icmp"'],
    [[...L, '--check', 'http:health'], '--check: the http path must start with "/"'],
    [[...L, '--rise', '2'], '--rise: needs --check'],
    [[...L, '--check', 'tcp', '--fall', '0'], '--fall: must be an integer in [1, 1000], got "0"'],
    [
      [...L, '--check', 'tcp', '--check-interval', '5'],
      '--check-interval: must be a duration in [10ms, 24h] (a number with a unit ms, s, m or h; no unit = ms), got "5"',
    ],
  ])('refuses %j with exit 2 naming the flag', (args, message) => {
    const r = spawnSync(process.execPath, [CLI, 'proxy', ...args], { encoding: 'utf8' });
    expect(r.stderr).toContain(message);
    expect(r.status).toBe(2);
  });

  it('marks a backend that stops accepting down, with no client traffic at all', async () => {
    const gone = net.createServer((s) => s.destroy());
    await new Promise<void>((r) => gone.listen(0, '127.0.0.1', r));
    const gonePort = (gone.address() as net.AddressInfo).port;
    const stays = net.createServer((s) => s.destroy());
    await new Promise<void>((r) => stays.listen(0, '127.0.0.1', r));
    const port = await freePort();
    const child = spawn(
      process.execPath,
      [
        CLI,
        'proxy',
        '--listen',
        `127.0.0.1:${port}`,
        '--backend',
        `gone=127.0.0.1:${gonePort}`,
        '--backend',
        `stays=127.0.0.1:${(stays.address() as net.AddressInfo).port}`,
        '--check',
        'tcp',
        '--check-interval',
        '20',
        '--fall',
        '2',
        '--rise',
        '1',
        '--log-level',
        'info',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let log = '';
    const seen = (text: string): Promise<void> =>
      new Promise((resolve, reject) => {
        const onData = (d: Buffer): void => {
          log += d.toString();
          if (log.includes(text)) resolve();
        };
        if (log.includes(text)) return resolve();
        child.stderr.on('data', onData);
        child.once('exit', (code) => reject(new Error(`proxy exited with ${code}: ${log}`)));
      });
    try {
      await seen('proxy ready');
      await new Promise<void>((r) => gone.close(() => r()));
      await seen('backend down (active check)');
      expect(log).toContain('"backend":"gone"');
      expect(log).not.toContain('"backend":"stays"');
    } finally {
      const exit = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
      child.kill('SIGTERM');
      expect(await exit).toBe(0);
      stays.close();
    }
  });
});
