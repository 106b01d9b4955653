/**
 * `poise top`'s scrape against real local HTTP servers: the body cap is
 * enforced while reading (an endless body is refused, naming the cap), one
 * deadline covers the body (a server that trickles forever) and the parse
 * (an injected clock that passes the deadline once the body is in). The
 * assertions are on the errors, never on elapsed time. The same endpoints
 * through the `poise top` command: test/integration/cli/top.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { scrapeMetrics } from '../../src/cli/metrics-scrape.js';
import { endless, serve, trickle } from '../helpers/hostile-http.js';
import { rejection } from '../helpers/thrown.js';

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
