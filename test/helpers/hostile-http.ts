/** Local HTTP servers that misbehave on purpose, for tests of what scrapes them. */
import { createServer, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { onTestFinished } from 'vitest';

/** A server whose every answer is written by `answer`, closed when the test ends; resolves to its /metrics URL. */
export async function serve(answer: (res: ServerResponse) => void): Promise<string> {
  const server = createServer((_req, res) => answer(res));
  onTestFinished(async () => {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/metrics`;
}

/** Headers, then an endless valid-looking body as fast as the client reads it. */
export function endless(res: ServerResponse, status = 200): void {
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
export function trickle(res: ServerResponse): void {
  res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4' });
  res.write('# TYPE x gauge\nx ');
  const t = setInterval(() => res.write('1'), 20);
  res.on('close', () => clearInterval(t));
}
