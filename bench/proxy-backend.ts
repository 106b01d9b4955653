/**
 * bench/proxy-backend: the Node HTTP backends of bench/proxy, one child
 * process (forked with IPC) holding several servers on 127.0.0.1, port 0.
 *
 *   fork('dist/bench/proxy-backend.js', [JSON.stringify({ delaysMs: [40, 4, 4, 4] })])
 *
 * Each server answers `GET /` with "ok\n" after its delay (0 = at once),
 * `GET /1m` and `GET /16m` with 1 MiB / 16 MiB bodies. It counts accepted
 * connections, open connections and requests; the parent asks over IPC:
 *   → { ports }                       once listening
 *   ← 'counts' → { connections, open, requests }  (arrays, one per server)
 *   ← 'reset'  → zeroes connections and requests → { reset: true }
 * Used for the slow-backend case (it needs a delay, nginx has none), for the
 * idle-connection memory case (it reports open connections), and for every
 * case when nginx is not installed.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const { delaysMs } = JSON.parse(process.argv[2] ?? '{"delaysMs":[0,0,0,0]}') as { delaysMs: number[] };
const BODIES: Readonly<Record<string, Buffer>> = {
  '/': Buffer.from('ok\n'),
  '/1m': Buffer.alloc(2 ** 20, 0x61),
  '/16m': Buffer.alloc(2 ** 24, 0x61),
};
const connections = delaysMs.map(() => 0);
const open = delaysMs.map(() => 0);
const requests = delaysMs.map(() => 0);

function serve(i: number): Promise<number> {
  const delay = delaysMs[i]!;
  const server = http.createServer({ keepAliveTimeout: 120_000, requestTimeout: 0, headersTimeout: 0 }, (req, res) => {
    requests[i]!++;
    const body = BODIES[req.url ?? '/'];
    if (body === undefined) {
      res.writeHead(404).end();
      return;
    }
    const reply = (): void => {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': body.length });
      res.end(body);
    };
    if (delay > 0) setTimeout(reply, delay);
    else reply();
  });
  server.timeout = 0;
  server.on('connection', (socket) => {
    connections[i]!++;
    open[i]!++;
    socket.setNoDelay(true);
    socket.once('close', () => open[i]!--);
  });
  return new Promise((resolve) =>
    server.listen({ host: '127.0.0.1', port: 0, backlog: 4096 }, () => resolve((server.address() as AddressInfo).port)),
  );
}

const ports = await Promise.all(delaysMs.map((_, i) => serve(i)));
process.on('message', (m) => {
  if (m === 'counts') process.send!({ connections, open, requests });
  else if (m === 'reset') {
    connections.fill(0);
    requests.fill(0);
    process.send!({ reset: true });
  }
});
process.on('disconnect', () => process.exit(0));
process.send!({ ports });
