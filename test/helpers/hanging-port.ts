/** A loopback port whose connects hang (for connect-timeout and read-while-connecting tests). */
import { spawn } from 'node:child_process';
import net from 'node:net';
import { expect } from 'vitest';

/**
 * A loopback port whose connects hang: a stopped child process listens with
 * a backlog of 1 and never accepts; two connections fill its accept queue,
 * so the kernel drops every later SYN (the connect neither succeeds nor fails).
 */
export async function hangingPort(cleanups: Array<() => unknown>): Promise<number> {
  const child = spawn(
    process.execPath,
    [
      '-e',
      "require('net').createServer().listen({ port: 0, host: '127.0.0.1', backlog: 1 }, function () { console.log(this.address().port); });",
    ],
    { stdio: ['ignore', 'pipe', 'inherit'] },
  );
  cleanups.push(() => {
    child.kill('SIGKILL');
  });
  const port = await new Promise<number>((resolve, reject) => {
    child.stdout!.once('data', (d: Buffer) => resolve(Number(d.toString().trim())));
    child.once('error', reject);
  });
  child.kill('SIGSTOP');
  // Fill the accept queue (the kernel completes these handshakes itself), then check a third connect hangs.
  for (let i = 0; i < 3; i++) {
    const s = net.connect({ port, host: '127.0.0.1' });
    s.on('error', () => {});
    cleanups.push(() => s.destroy());
    if (i < 2) await new Promise((r) => s.once('connect', r));
    else {
      let connected = false;
      s.once('connect', () => (connected = true));
      await new Promise((r) => setTimeout(r, 200));
      expect(connected, 'the hanging port accepted a third connection').toBe(false);
    }
  }
  return port;
}
