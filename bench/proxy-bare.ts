/**
 * bench/proxy-bare: the "bare Node" peer of bench/proxy — the smallest
 * correct Node TCP proxy, to show where Node itself is the ceiling. It uses
 * nothing of poise.
 *
 *   node dist/bench/proxy-bare.js '{"port":8080,"backends":[9001,9002],"threads":1,"youngMb":4}'
 *
 * prints `proxy-bare listening 127.0.0.1:<port> threads <n>` once every
 * thread listens (port 0 picks a free one).
 *
 * `net.createServer` with `allowHalfOpen`, round-robin over the backends
 * (127.0.0.1), `setNoDelay(true)` on both sockets, `pipe()` both ways (a FIN
 * is passed on as a FIN, the other direction keeps flowing), an error on
 * either socket destroys both. No timeouts, no retries, no health, no
 * metrics: what is left is Node's own per-connection cost.
 *
 * Threads have poise proxy's shape: `threads` worker threads, each listening
 * on the port (with `reusePort` when there are several, Node >= 22.12 on
 * Linux; on older Node one worker accepts, as `poise proxy --workers N` does),
 * each with its own round-robin counter, and the same young-generation cap
 * (`youngMb`) as poise's proxy workers, so that the memory figures compare
 * per-connection objects rather than V8 sizing.
 */
import net from 'node:net';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { bareSplice } from './lib/bare-splice.js';

interface Job {
  port: number;
  backends: number[];
  threads: number;
  youngMb: number;
}

function reusePortSupported(): boolean {
  const [major = 0, minor = 0] = process.versions.node.split('.').map(Number);
  return process.platform === 'linux' && (major > 22 || (major === 22 && minor >= 12));
}

function proxy(job: Job, reusePort: boolean): void {
  let next = 0;
  const server = net.createServer({ allowHalfOpen: true }, (client) => {
    const port = job.backends[next]!;
    next = (next + 1) % job.backends.length;
    bareSplice(client, port);
  });
  const opts: net.ListenOptions & { reusePort?: boolean } = { host: '127.0.0.1', port: job.port };
  if (reusePort) opts.reusePort = true;
  server.listen(opts, () => parentPort?.postMessage((server.address() as net.AddressInfo).port));
}

if (isMainThread) {
  const job = JSON.parse(process.argv[2] ?? '{}') as Job;
  if (!Number.isInteger(job.port) || !Array.isArray(job.backends) || job.backends.length === 0)
    throw new Error(`proxy-bare: expected {"port","backends":[...],"threads","youngMb"}, got ${process.argv[2]}`);
  const reusePort = job.threads > 1 && reusePortSupported();
  const threads = reusePort ? job.threads : 1;
  if (threads < job.threads) process.stderr.write(`proxy-bare: Node ${process.version} has no reusePort: one thread accepts\n`);
  const start = (port: number): Promise<number> =>
    new Promise((resolve) => {
      const w = new Worker(new URL(import.meta.url), {
        workerData: { job: { ...job, port }, reusePort },
        resourceLimits: { maxYoungGenerationSizeMb: job.youngMb },
      });
      w.once('message', (bound: number) => resolve(bound));
      w.on('error', (err) => {
        process.stderr.write(`proxy-bare: ${err.stack ?? String(err)}\n`);
        process.exit(1);
      });
    });
  // The first worker binds (port 0 picks one), the others join its port.
  const port = await start(job.port);
  await Promise.all(Array.from({ length: threads - 1 }, () => start(port)));
  process.stdout.write(`proxy-bare listening 127.0.0.1:${port} threads ${threads}\n`);
  process.on('SIGTERM', () => process.exit(0));
} else {
  const { job, reusePort } = workerData as { job: Job; reusePort: boolean };
  proxy(job, reusePort);
}
