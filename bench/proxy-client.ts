/**
 * bench/proxy-client: the closed-loop HTTP/1.1 load generator bench/proxy
 * uses when wrk is not installed; a child process of its own so that it does
 * not share an event loop with the bench.
 *
 *   node dist/bench/proxy-client.js '{"port":8080,"path":"/","connections":64,"seconds":5,"close":false}'
 *
 * `connections` loops each send one GET, read the reply (Content-Length
 * framed) and send the next; with `close` every request opens its own
 * connection (`Connection: close`, like `wrk -H 'Connection: close'`).
 * Prints one JSON {@link LoadResult} on stdout. Latency is from the write of
 * the request (after connect for `close`, as wrk measures) to the last body
 * byte, in Node's HdrHistogram.
 */
import net from 'node:net';
import { createHistogram } from 'node:perf_hooks';
import type { LoadResult } from './lib/proxy-stats.js';

interface Job {
  port: number;
  path: string;
  connections: number;
  seconds: number;
  close: boolean;
}

const job = JSON.parse(process.argv[2] ?? '{}') as Job;
const request = Buffer.from(`GET ${job.path} HTTP/1.1\r\nHost: 127.0.0.1\r\n${job.close ? 'Connection: close\r\n' : ''}\r\n`);
const hist = createHistogram({ lowest: 1, highest: 3_600_000_000, figures: 3 });
const HEADER_END = Buffer.from('\r\n\r\n');
let requests = 0;
let bytes = 0;
let errors = 0;
let non2xx = 0;
const started = process.hrtime.bigint();
const deadline = started + BigInt(Math.round(job.seconds * 1e9));

/** Runs one connection's loop until the deadline; resolves when it has stopped. */
function loop(): Promise<void> {
  return new Promise((resolve) => {
    let socket: net.Socket;
    let head: Buffer = Buffer.alloc(0);
    let bodyLeft = -1;
    let sentAt = 0n;
    let status = 0;
    let inFlight = false;
    const next = (): void => {
      if (process.hrtime.bigint() >= deadline) {
        socket?.destroy();
        resolve();
        return;
      }
      if (job.close || socket === undefined || socket.destroyed) open();
      else send();
    };
    const send = (): void => {
      head = Buffer.alloc(0);
      bodyLeft = -1;
      sentAt = process.hrtime.bigint();
      inFlight = true;
      socket.write(request);
    };
    const done = (): void => {
      inFlight = false;
      hist.record(Math.max(1, Number((process.hrtime.bigint() - sentAt) / 1000n)));
      requests++;
      if (status < 200 || status >= 400) non2xx++;
      if (job.close) socket.destroy();
      next();
    };
    const onData = (chunk: Buffer): void => {
      bytes += chunk.length;
      if (bodyLeft < 0) {
        head = head.length === 0 ? chunk : Buffer.concat([head, chunk]);
        const end = head.indexOf(HEADER_END);
        if (end < 0) return;
        const text = head.subarray(0, end).toString('latin1');
        status = Number(text.slice(9, 12));
        const m = /\r\ncontent-length:\s*(\d+)/i.exec(text);
        bodyLeft = (m === null ? 0 : Number(m[1])) - (head.length - end - 4);
      } else bodyLeft -= chunk.length;
      if (bodyLeft <= 0) done();
    };
    const open = (): void => {
      inFlight = true;
      socket = net.connect({ host: '127.0.0.1', port: job.port, noDelay: true }, send);
      const s = socket;
      s.on('data', onData);
      s.on('error', () => {}); // 'close' follows and counts it
      s.once('close', () => {
        // Closed before the reply was complete (or before connecting): an error, then the next request.
        if (s !== socket || !inFlight) return;
        inFlight = false;
        errors++;
        setImmediate(next);
      });
    };
    next();
  });
}

await Promise.all(Array.from({ length: job.connections }, loop));
const seconds = Number(process.hrtime.bigint() - started) / 1e9;
const result: LoadResult = {
  requests,
  seconds,
  reqPerSec: requests / seconds,
  bytesPerSec: bytes / seconds,
  p50Ms: hist.count === 0 ? Number.NaN : hist.percentile(50) / 1000,
  p99Ms: hist.count === 0 ? Number.NaN : hist.percentile(99) / 1000,
  errors,
  non2xx,
};
process.stdout.write(`${JSON.stringify(result)}\n`);
