/**
 * The pure parts of bench/proxy: wrk's report, medians and spread, the
 * poise/HAProxy ratio table, the profile summary.
 */
import { describe, expect, it } from 'vitest';
import {
  attribute,
  bareRatio,
  type Comparison,
  type CpuProfile,
  meets,
  parseDurationMs,
  parseSize,
  parseWrk,
  ratio,
  ratioRows,
  summarize,
  topFrames,
} from '../../bench/lib/proxy-stats.js';

// A real `wrk -t1 -c64 -d2s --latency -H 'Connection: close'` report (wrk 4.1.0, Debian), with the error lines wrk adds.
const WRK = `Running 2s test @ http://127.0.0.1:18777/
  1 threads and 64 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency    11.61ms    5.75ms  27.77ms   66.71%
    Req/Sec     2.78k   329.69     3.44k    65.00%
  Latency Distribution
     50%   11.25ms
     75%   15.69ms
     90%   19.41ms
     99%  1.02s
  5692 requests in 2.07s, 806.00KB read
  Socket errors: connect 3, read 4, write 5, timeout 6
  Non-2xx or 3xx responses: 7
Requests/sec:   2744.77
Transfer/sec:    388.66KB
`;

describe('wrk output', () => {
  it('reads counts, rates and percentiles from the exact totals line', () => {
    const r = parseWrk(WRK);
    expect(r.requests).toBe(5692);
    expect(r.seconds).toBeCloseTo(2.07, 10);
    expect(r.reqPerSec).toBeCloseTo(5692 / 2.07, 9);
    expect(r.bytesPerSec).toBeCloseTo((806 * 1024) / 2.07, 6);
    expect(r.p50Ms).toBeCloseTo(11.25, 10);
    expect(r.p99Ms).toBeCloseTo(1020, 10);
    expect(r.errors).toBe(3 + 4 + 5 + 6);
    expect(r.non2xx).toBe(7);
  });

  it('has zero errors when wrk prints no error lines', () => {
    const clean = WRK.split('\n')
      .filter((l) => !l.includes('errors') && !l.includes('Non-2xx'))
      .join('\n');
    expect(parseWrk(clean)).toMatchObject({ errors: 0, non2xx: 0 });
  });

  it('uses 1024-based sizes and every wrk time unit', () => {
    expect(parseSize('10B')).toBe(10);
    expect(parseSize('1.50KB')).toBe(1536);
    expect(parseSize('697.16MB')).toBeCloseTo(697.16 * 2 ** 20, 3);
    expect(parseSize('1.23GB')).toBeCloseTo(1.23 * 2 ** 30, 0);
    expect(parseDurationMs('612.00us')).toBeCloseTo(0.612, 12);
    expect(parseDurationMs('1.20ms')).toBeCloseTo(1.2, 12);
    expect(parseDurationMs('2.01s')).toBeCloseTo(2010, 9);
    expect(parseDurationMs('1.00m')).toBe(60_000);
    expect(() => parseSize('12 MB')).toThrow('wrk size: cannot read "12 MB"');
    expect(() => parseDurationMs('3d')).toThrow('wrk duration: cannot read "3d"');
  });

  it('fails naming the missing part instead of returning zeros', () => {
    expect(() => parseWrk('unable to connect to 127.0.0.1:1 Connection refused')).toThrow('no "N requests in T, B read" line');
    const noLatency = WRK.split('\n')
      .filter((l) => !/^\s+\d+%/.test(l))
      .join('\n');
    expect(() => parseWrk(noLatency)).toThrow('run wrk with --latency');
  });
});

describe('median and spread', () => {
  it('takes the middle value of an odd count and the mean of the middle two of an even count, whatever the order', () => {
    expect(summarize([30, 10, 20]).median).toBe(20);
    expect(summarize([4, 1, 3, 2]).median).toBe(2.5);
    expect(summarize([7]).median).toBe(7);
  });

  it('spread is (max − min) / median in percent, and keeps the rounds in measured order', () => {
    const s = summarize([110, 90, 100]);
    expect(s).toMatchObject({ min: 90, max: 110, median: 100, rounds: [110, 90, 100] });
    expect(s.spreadPct).toBeCloseTo(20, 12);
    expect(summarize([5]).spreadPct).toBe(0);
    expect(summarize([0, 0]).spreadPct).toBe(0);
    expect(summarize([-1, 0, 1]).spreadPct).toBeNaN();
  });

  it('refuses an empty list', () => {
    expect(() => summarize([])).toThrow('summarize: no values');
  });
});

const comparison = (poise: number[], haproxy: number[] | undefined, extra: Partial<Comparison> = {}): Comparison => ({
  scenario: 'short',
  metric: 'req/s',
  unit: 'req/s',
  threads: 1,
  better: 'higher',
  poise: summarize(poise),
  ...(haproxy === undefined ? {} : { haproxy: summarize(haproxy) }),
  ...extra,
});

describe('ratio table', () => {
  it('divides the medians, poise over HAProxy', () => {
    expect(ratio(comparison([8, 9, 10], [10, 12, 11]))).toBeCloseTo(9 / 11, 12);
    expect(ratio(comparison([8], undefined))).toBeNaN();
    expect(ratio(comparison([8], [0]))).toBeNaN();
  });

  it('divides the medians, poise over bare Node, independently of HAProxy', () => {
    expect(bareRatio(comparison([8], [10], { bare: summarize([4, 5, 6]) }))).toBeCloseTo(8 / 5, 12);
    expect(bareRatio(comparison([8], [10]))).toBeNaN();
    expect(bareRatio(comparison([8], undefined, { bare: summarize([0]) }))).toBeNaN();
  });

  it('judges ratio targets against the ratio and absolute ones against poise alone', () => {
    const target = { kind: 'ratio', op: '>=', value: 0.8 } as const;
    expect(meets(comparison([80], [100], { target }))).toBe(true);
    expect(meets(comparison([79], [100], { target }))).toBe(false);
    expect(meets(comparison([79], undefined, { target }))).toBeUndefined();
    const kb = { kind: 'absolute', op: '<=', value: 6 } as const;
    expect(meets(comparison([6], undefined, { target: kb }))).toBe(true);
    expect(meets(comparison([6.01], [3], { target: kb }))).toBe(false);
    expect(meets(comparison([1], [1]))).toBeUndefined();
  });

  it('prints medians with spread, the ratio and a mark only where a target was judged', () => {
    const rows = ratioRows([
      comparison([900, 1000, 1100], [2000, 2000, 2000], {
        target: { kind: 'ratio', op: '>=', value: 0.8 },
        bare: summarize([1250]),
      }),
      comparison([14.6], [3.3], {
        scenario: 'idle',
        metric: 'per connection',
        unit: 'KB',
        better: 'lower',
        target: { kind: 'absolute', op: '<=', value: 6 },
      }),
      comparison([5], undefined, { target: { kind: 'ratio', op: '>=', value: 0.9 } }),
    ]);
    expect(rows).toEqual([
      {
        scenario: 'short',
        threads: '1',
        metric: 'req/s (req/s)',
        poise: '1,000 ±20%',
        haproxy: '2,000 ±0%',
        'bare node': '1,250 ±0%',
        'poise/haproxy': '0.50×',
        'poise/bare': '0.80×',
        target: '>= 0.8× ✗',
      },
      {
        scenario: 'idle',
        threads: '1',
        metric: 'per connection (KB)',
        poise: '14.6 ±0%',
        haproxy: '3.30 ±0%',
        'bare node': '—',
        'poise/haproxy': '4.42×',
        'poise/bare': '—',
        target: '<= 6 ✗',
      },
      {
        scenario: 'short',
        threads: '1',
        metric: 'req/s (req/s)',
        poise: '5.00 ±0%',
        haproxy: '—',
        'bare node': '—',
        'poise/haproxy': '—',
        'poise/bare': '—',
        target: '>= 0.9×',
      },
    ]);
  });
});

describe('profile summary', () => {
  const frame = (functionName: string, url: string, lineNumber: number) => ({ functionName, url, lineNumber });
  const profile: CpuProfile = {
    startTime: 0,
    endTime: 1,
    nodes: [
      { id: 1, callFrame: frame('(root)', '', -1), hitCount: 0 },
      { id: 2, callFrame: frame('writev', 'node:internal/stream_base_commons', 122), hitCount: 30 },
      { id: 3, callFrame: frame('(idle)', '', -1), hitCount: 50 },
      { id: 4, callFrame: frame('writev', 'node:internal/stream_base_commons', 122), hitCount: 10 },
      { id: 5, callFrame: frame('', 'file:///work/x/dist/src/proxy/tcp-proxy.js', 40) },
      { id: 6, callFrame: frame('pick', 'file:///work/x/dist/src/policy/power-of-two.js', 9), hitCount: 10 },
    ],
  };

  it('merges a function recorded under several nodes and ranks by self time', () => {
    expect(topFrames(profile)).toEqual([
      { name: '(idle)', selfPct: 50 },
      { name: 'writev node:internal/stream_base_commons:123', selfPct: 40 },
      { name: 'pick src/policy/power-of-two.js:10', selfPct: 10 },
    ]);
    expect(topFrames(profile, 1)).toHaveLength(1);
  });

  it('is empty for a profile without samples', () => {
    expect(topFrames({ startTime: 0, endTime: 0, nodes: [{ id: 1, callFrame: frame('(root)', '', -1) }] })).toEqual([]);
  });
});

describe('profile attribution', () => {
  const frame = (functionName: string, url: string) => ({ functionName, url, lineNumber: 0 });
  const POISE = 'file:///work/x/dist/src/proxy/connection.js';
  const ROUTER = 'file:///work/x/dist/src/runtime/router.js';
  // A tree: (root) → onconnection (node:net) → writeBuffer (native)
  //                → serveConnection (poise net) → now (native) ; → take (poise runtime)
  //                → pino write (node_modules) ; emit (node:events) ; GC, program, idle
  const profile: CpuProfile = {
    startTime: 0,
    endTime: 1,
    nodes: [
      { id: 1, callFrame: frame('(root)', ''), children: [2, 4, 7, 8, 9, 10, 11] },
      { id: 2, callFrame: frame('onconnection', 'node:net'), hitCount: 5, children: [3] },
      { id: 3, callFrame: frame('writeBuffer', ''), hitCount: 25 },
      { id: 4, callFrame: frame('serveConnection', POISE), hitCount: 4, children: [5, 6] },
      { id: 5, callFrame: frame('now', ''), hitCount: 6 },
      { id: 6, callFrame: frame('take', ROUTER), hitCount: 10 },
      { id: 7, callFrame: frame('write', 'file:///work/x/node_modules/pino/lib/proto.js'), hitCount: 5 },
      { id: 8, callFrame: frame('emit', 'node:events'), hitCount: 15, children: [12] },
      { id: 9, callFrame: frame('(garbage collector)', ''), hitCount: 20 },
      { id: 10, callFrame: frame('(program)', ''), hitCount: 10 },
      { id: 11, callFrame: frame('(idle)', ''), hitCount: 100 },
      { id: 12, callFrame: frame('readableAddChunk', 'node:internal/streams/readable'), hitCount: 0 },
    ],
  };

  it('charges a native frame to its nearest caller with a script, and shares the busy samples by category', () => {
    const a = attribute(profile);
    expect(a.samples).toBe(200);
    // busy = 100: net/stream 5 + 25, poise 4 + 6 + 10, dependencies 5, other Node 15, GC 20, program 10.
    expect(a.pct).toEqual({ poise: 20, 'net/stream': 30, 'node other': 15, dependencies: 5, gc: 20, program: 10, idle: 50 });
    expect(a.poiseByFolder).toEqual({ proxy: 10, runtime: 10 });
  });

  it('a native frame with no scripted caller is (program), and an all-idle profile has no busy share', () => {
    const lone: CpuProfile = {
      startTime: 0,
      endTime: 1,
      nodes: [
        { id: 1, callFrame: frame('(root)', ''), children: [2, 3] },
        { id: 2, callFrame: frame('epoll_wait', ''), hitCount: 3 },
        { id: 3, callFrame: frame('(idle)', ''), hitCount: 1 },
      ],
    };
    expect(attribute(lone).pct).toMatchObject({ program: 100, idle: 25, poise: 0 });
    const idle: CpuProfile = { startTime: 0, endTime: 1, nodes: [{ id: 1, callFrame: frame('(idle)', ''), hitCount: 9 }] };
    expect(attribute(idle).pct).toEqual({ poise: 0, 'net/stream': 0, 'node other': 0, dependencies: 0, gc: 0, program: 0, idle: 100 });
  });
});
