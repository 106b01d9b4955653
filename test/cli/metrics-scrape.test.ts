/**
 * `poise top`'s scrape against real local HTTP servers: the body cap is
 * enforced while reading (an endless body is refused, naming the cap), one
 * deadline covers the body (a server that trickles forever) and the parse
 * (an injected clock that passes the deadline once the body is in). The
 * assertions are on the errors, never on elapsed time.
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { scrapeMetrics } from '../../src/cli/metrics-scrape.js';
import { runCli } from '../helpers/cli.js';
import { rejection } from '../helpers/thrown.js';

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise((r) => s.close(r));
  }
});

/** A server whose every answer is written by `answer`; resolves to its /metrics URL. */
async function serve(answer: (res: ServerResponse) => void): Promise<string> {
  const server = createServer((_req, res) => answer(res));
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`;
}

/** Headers, then an endless valid-looking body as fast as the client reads it. */
function endless(res: ServerResponse, status = 200): void {
  res.writeHead(status, { 'content-type': 'text/plain; version=0.0.4' });
  res.write('# TYPE x gauge\nx{a="');
  const chunk = Buffer.alloc(64 * 1024, 'a');
  const pump = (): void => {
    while (!res.destroyed && res.write(chunk));
    if (!res.destroyed) res.once('drain', pump);
  };
  pump();
}

/** Headers and one line, then one byte every 20 ms, forever. */
function trickle(res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
  res.write('# TYPE x gauge\nx ');
  const t = setInterval(() => res.write('1'), 20);
  res.on('close', () => clearInterval(t));
}

describe('scrapeMetrics (one deadline, one cap)', () => {
  it('an endless body is refused once it passes maxBytes, naming the cap (InvalidConfig), long before the deadline', async () => {
    const url = await serve(endless);
    const err = await rejection(scrapeMetrics(url, { timeoutMs: 600_000, maxBytes: 1 << 20 }));
    expect(err.code).toBe('InvalidConfig');
    expect(err.message).toBe(`--metrics: the body of ${url} exceeds the limit of 1048576 bytes`);
  });

  it('a body that trickles forever ends at the deadline (Unavailable, naming the timeout)', async () => {
    const url = await serve(trickle);
    const err = await rejection(scrapeMetrics(url, { timeoutMs: 300, maxBytes: 1 << 20 }));
    expect(err.code).toBe('Unavailable');
    expect(err.message).toBe(`--metrics: ${url} did not answer within 300 ms (--timeout covers the request, the body and the parse)`);
  });

  it('the deadline covers the parse: a clock past it once the body is in stops the parse with the same error', async () => {
    const body = Array.from({ length: 2000 }, (_, i) => `m${i} ${i}\n`).join('');
    const url = await serve((res) => res.end(body));
    // First look: the start (deadline = 0 + 1000). Every later look is past it.
    let looks = 0;
    const now = (): number => (looks++ === 0 ? 0 : 1001);
    const err = await rejection(scrapeMetrics(url, { timeoutMs: 1000, maxBytes: 1 << 20, now }));
    expect(err.message).toBe(`--metrics: ${url} did not answer within 1000 ms (--timeout covers the request, the body and the parse)`);
    // The same body with a clock that stands still parses whole.
    const stand = await scrapeMetrics(url, { timeoutMs: 1000, maxBytes: 1 << 20, now: () => 0 });
    expect(stand.size).toBe(2000);
  });

  it('a non-200 answer is Unavailable naming the status; its body is not read', async () => {
    const url = await serve((res) => endless(res, 503));
    const err = await rejection(scrapeMetrics(url, { timeoutMs: 600_000, maxBytes: 1024 }));
    expect(err.message).toBe(`--metrics: ${url} answered 503`);
  });
});

describe('poise top --once against a hostile endpoint', () => {
  it('--max-bytes: an endless body fails the command with the cap in the message (exit 3)', async () => {
    const url = await serve(endless);
    const r = await runCli(['top', '--metrics', url, '--once', '--interval', '100ms', '--max-bytes', '65536']);
    expect(r.stderr).toBe(`poise top: --metrics: the body of ${url} exceeds the limit of 65536 bytes\n`);
    expect(r.code).toBe(3);
  });

  it('--timeout: headers, then a body that never ends, fails the command at the timeout (exit 1)', async () => {
    const url = await serve(trickle);
    const r = await runCli(['top', '--metrics', url, '--once', '--interval', '100ms', '--timeout', '300ms']);
    expect(r.stderr).toBe(
      `poise top: --metrics: ${url} did not answer within 300 ms (--timeout covers the request, the body and the parse)\n`,
    );
    expect(r.code).toBe(1);
  });

  it('--timeout and --max-bytes are validated and belong to --metrics', async () => {
    expect(await runCli(['top', '--metrics', 'http://127.0.0.1:1', '--timeout', '5ms'])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--timeout: must be a duration in [100ms, 600000ms]'),
    });
    expect(await runCli(['top', '--metrics', 'http://127.0.0.1:1', '--max-bytes', '10'])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--max-bytes: must be an integer in [1024, 1073741824], got "10"'),
    });
    expect(await runCli(['top', '--redis', 'redis://127.0.0.1:1', '--cluster', 'c', '--timeout', '1s'])).toMatchObject({
      code: 2,
      stderr: expect.stringContaining('--timeout and --max-bytes go with --metrics, not --redis'),
    });
  });
});
