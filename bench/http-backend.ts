/**
 * bench/http-backend: the loopback HTTP backends of bench/http, in a child
 * process of their own (forked with IPC), so that the client process's CPU
 * per request is the client's alone.
 *
 *   fork('dist/bench/http-backend.js', [String(servers)])
 *
 * Each server answers `GET /` with its id (also in `x-backend`) after its
 * delay (0 = at once), or with a 503 for a share of requests; a share
 * `stallRate` of requests (any server) waits `stallMs` more (bench:tail's
 * fan-out: the request is slow, not the backend). The parent sets them over IPC:
 *   → { ports }                                           once listening
 *   ← { delaysMs: number[], errorRates: number[], stallRate?, stallMs? } → { ok: true }
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const servers = Number(process.argv[2] ?? '4');
let delaysMs = new Array<number>(servers).fill(0);
let errorRates = new Array<number>(servers).fill(0);
let stallRate = 0;
let stallMs = 0;

function serve(i: number): Promise<number> {
  const id = `b${i}`;
  const body = Buffer.from(id);
  const server = http.createServer({ keepAliveTimeout: 120_000, requestTimeout: 0, headersTimeout: 0 }, (_req, res) => {
    const failed = errorRates[i]! > 0 && Math.random() < errorRates[i]!;
    const reply = (): void => {
      res.writeHead(failed ? 503 : 200, { 'content-type': 'text/plain', 'content-length': body.length, 'x-backend': id });
      res.end(body);
    };
    const delay = delaysMs[i]! + (stallRate > 0 && Math.random() < stallRate ? stallMs : 0);
    if (delay > 0) setTimeout(reply, delay);
    else reply();
  });
  server.timeout = 0;
  server.on('connection', (socket) => socket.setNoDelay(true));
  return new Promise((resolve) =>
    server.listen({ host: '127.0.0.1', port: 0, backlog: 4096 }, () => resolve((server.address() as AddressInfo).port)),
  );
}

const ports = await Promise.all(Array.from({ length: servers }, (_, i) => serve(i)));
process.on('message', (m: { delaysMs: number[]; errorRates: number[]; stallRate?: number; stallMs?: number }) => {
  delaysMs = m.delaysMs;
  errorRates = m.errorRates;
  stallRate = m.stallRate ?? 0;
  stallMs = m.stallMs ?? 0;
  process.send!({ ok: true });
});
process.on('disconnect', () => process.exit(0));
process.send!({ ports });
