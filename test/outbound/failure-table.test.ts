/**
 * The failure table (undici's balanced-pool cases are the model): three real
 * loopback backends A, B, C that refuse, reset, answer 503 or reset after
 * answering on chosen dials; a round-robin router, ejecting a backend after
 * 2 consecutive failures, on a clock that stands still (an ejection lasts
 * the whole case); one operation after another through every consumer of
 * the one retry rule (src/outbound/retry-run.ts): connect(), routedStream(),
 * an in-process TcpProxy and the HTTP dispatcher (GETs). Each case states
 * the exact pick sequence (each pick marked with what its dial met), the
 * retries (picks beyond the first of an operation), the operations that
 * failed for want of a backend, and each backend's ejections; the servers'
 * accepted connections are counted against the picks. The connection
 * consumers share one expectation; the dispatcher has its own where HTTP
 * differs (a GET reset before any response byte is resent elsewhere; a reset
 * after the answer is the backend's failure), and the 503 cases are its only.
 */
import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { request } from 'undici';
import { PoiseDispatcher } from '../../src/http/dispatcher.js';
import { connect } from '../../src/outbound/connect.js';
import { routedStream } from '../../src/outbound/routed-stream.js';
import { TcpProxy } from '../../src/proxy/tcp-proxy.js';
import { Balancer } from '../../src/runtime/balancer.js';
import type { Router } from '../../src/runtime/router.js';
import { manualClock } from '../helpers/runtime.js';
import { type DialScript, dialOutcome, ScriptedBackend } from '../helpers/scripted-backend.js';
import { rejection } from '../helpers/thrown.js';
import { until } from '../helpers/until.js';

const NAMES = ['A', 'B', 'C'] as const;
type Name = (typeof NAMES)[number];

/** What one consumer must see over a case. */
interface Expected {
  /** Every pick in order: the backend, then `/refused`, `/reset`, `/503` or `/answer-reset` when its dial met that. */
  picks: string[];
  retries: number;
  /** Operations (0-based) that failed: no backend accepted within the attempts. */
  failed?: number[];
  /** Ejections per backend over the case; the others 0. */
  ejections?: Partial<Record<Name, number>>;
}

interface Case extends Expected {
  name: string;
  script: Partial<Record<Name, DialScript>>;
  /** Operations, one after another. */
  operations: number;
  /** Backends one operation may try; default 3. */
  attempts?: number;
  /** The HTTP dispatcher's expectation where it differs from the connection consumers'. */
  http?: Expected;
  /** Only the HTTP dispatcher runs the case (a 503 means nothing to a TCP consumer). */
  httpOnly?: boolean;
}

const CASES: Case[] = [
  {
    name: 'all up: round robin, no retry',
    script: {},
    operations: 6,
    picks: ['A', 'B', 'C', 'A', 'B', 'C'],
    retries: 0,
  },
  {
    name: 'A refuses its first dial: retried on B; one failure ejects nobody',
    script: { A: { refuse: [0] } },
    operations: 6,
    picks: ['A/refused', 'B', 'C', 'A', 'B', 'C', 'A'],
    retries: 1,
  },
  {
    name: 'A refuses twice in a row: ejected at the second, retried on B; A is skipped after',
    script: { A: { refuse: [0, 1] } },
    operations: 6,
    picks: ['A/refused', 'B', 'C', 'A/refused', 'B', 'C', 'B', 'C'],
    retries: 2,
    ejections: { A: 1 },
  },
  {
    name: 'A refuses, accepts, refuses: a success between failures clears them; no ejection',
    script: { A: { refuse: [0, 2] } },
    operations: 7,
    picks: ['A/refused', 'B', 'C', 'A', 'B', 'C', 'A/refused', 'B', 'C'],
    retries: 2,
  },
  {
    name: 'B resets its first connection: the operation gets the reset, no retry (the connection was made)',
    script: { B: { reset: [0] } },
    operations: 6,
    picks: ['A', 'B/reset', 'C', 'A', 'B', 'C'],
    retries: 0,
    http: { picks: ['A', 'B/reset', 'C', 'A', 'B', 'C', 'A'], retries: 1 },
  },
  {
    name: 'C resets, then refuses: two consecutive failures eject it; the retry goes on to A',
    script: { C: { reset: [0], refuse: [1] } },
    operations: 7,
    picks: ['A', 'B', 'C/reset', 'A', 'B', 'C/refused', 'A', 'B'],
    retries: 1,
    ejections: { C: 1 },
    http: { picks: ['A', 'B', 'C/reset', 'A', 'B', 'C/refused', 'A', 'B', 'A'], retries: 2, ejections: { C: 1 } },
  },
  {
    name: 'C refuses, then resets before answering: a connect alone clears nothing, the reset is a failure too; ejected',
    script: { C: { refuse: [0], reset: [1] } },
    operations: 5,
    picks: ['A', 'B', 'C/refused', 'A', 'B', 'C/reset'],
    retries: 1,
    ejections: { C: 1 },
    http: { picks: ['A', 'B', 'C/refused', 'A', 'B', 'C/reset', 'A'], retries: 2, ejections: { C: 1 } },
  },
  {
    name: 'B resets every connection before answering: two resets in a row eject it (Envoy counts them connection failures); B is skipped after',
    script: { B: { reset: [0, 1, 2] } },
    operations: 9,
    picks: ['A', 'B/reset', 'C', 'A', 'B/reset', 'C', 'A', 'C', 'A'],
    retries: 0,
    ejections: { B: 1 },
    http: { picks: ['A', 'B/reset', 'C', 'A', 'B/reset', 'C', 'A', 'C', 'A', 'C', 'A'], retries: 2, ejections: { B: 1 } },
  },
  {
    name: 'every backend refuses its first dial: the operation fails after 3 attempts; the next starts over at A',
    script: { A: { refuse: [0] }, B: { refuse: [0] }, C: { refuse: [0] } },
    operations: 4,
    picks: ['A/refused', 'B/refused', 'C/refused', 'A', 'B', 'C'],
    retries: 2,
    failed: [0],
  },
  {
    name: 'attempts 2, A and B refuse: the operation fails with C untried; C serves the next',
    script: { A: { refuse: [0] }, B: { refuse: [0] } },
    operations: 4,
    attempts: 2,
    picks: ['A/refused', 'B/refused', 'C', 'A', 'B'],
    retries: 1,
    failed: [0],
  },
  {
    name: 'every backend refuses twice: all three ejected; the router fails open and A serves again',
    script: { A: { refuse: [0, 1] }, B: { refuse: [0, 1] }, C: { refuse: [0, 1] } },
    operations: 5,
    picks: ['A/refused', 'B/refused', 'C/refused', 'A/refused', 'B/refused', 'C/refused', 'A', 'B', 'C'],
    retries: 4,
    failed: [0, 1],
    ejections: { A: 1, B: 1, C: 1 },
  },
  {
    name: 'B answers, then resets, twice: the answer reached the caller, so no retry; a connection that answered is alive (no ejection), an HTTP response cut short is a failure (ejected at the second)',
    script: { B: { resetAfterAnswer: [0, 1] } },
    operations: 8,
    picks: ['A', 'B/answer-reset', 'C', 'A', 'B/answer-reset', 'C', 'A', 'B'],
    retries: 0,
    http: {
      picks: ['A', 'B/answer-reset', 'C', 'A', 'B/answer-reset', 'C', 'A', 'C'],
      retries: 0,
      ejections: { B: 1 },
    },
  },
  {
    name: 'A answers 503 twice: each response goes to the caller (no retry) and is a failure; the second ejects A',
    script: { A: { status503: [0, 1] } },
    operations: 7,
    picks: ['A/503', 'B', 'C', 'A/503', 'B', 'C', 'B'],
    retries: 0,
    ejections: { A: 1 },
    httpOnly: true,
  },
];

const silent = createLogger({ level: 'silent' });

/** Three scripted backends, a round-robin router over them that records every pick (marked with what its dial meets). */
async function setUp(c: Case, http = false) {
  const backends = await Promise.all(NAMES.map((n) => ScriptedBackend.start(n, { http })));
  const balancer = new Balancer({ capacity: 4, logger: silent });
  balancer.update(backends.map((b) => ({ id: b.name, address: `127.0.0.1:${b.port}` })));
  const router = balancer.router({
    policy: 'round-robin',
    seed: 1,
    clock: manualClock().now,
    logger: silent,
    ejection: { consecutiveFailures: 2, baseMs: 60_000, maxMs: 60_000 },
  });
  const dials = new Map<string, number>(NAMES.map((n) => [n, 0]));
  const outcomeOf = (name: string, dial: number) => dialOutcome(c.script[name as Name] ?? {}, dial);
  const picks: string[] = [];
  const acquire = router.acquire.bind(router);
  router.acquire = (opts) => {
    const lease = acquire(opts);
    const dial = dials.get(lease.id)!;
    dials.set(lease.id, dial + 1);
    const met = outcomeOf(lease.id, dial);
    picks.push(met === 'accepted' ? lease.id : `${lease.id}/${met}`);
    return lease;
  };
  /** Sets every backend up for its next dial. */
  const prepare = () => Promise.all(backends.map((b) => b.prepare(outcomeOf(b.name, dials.get(b.name)!))));
  const close = async () => {
    balancer.close();
    await Promise.all(backends.map((b) => b.stop()));
  };
  return { backends, balancer, router, picks, prepare, close };
}

/** One operation through connect(): connected and echoed, reset by the backend, or refused everywhere. */
async function throughConnect(router: Router, attempts: number, fails: boolean, picks: string[]): Promise<void> {
  if (fails) {
    const err = await rejection(connect(router, { attempts }));
    expect(err.code).toBe('NoEligibleCandidates');
    return;
  }
  const { socket, lease } = await connect(router, { attempts });
  let got = '';
  let error: unknown;
  socket.on('data', (d) => {
    got += d.toString();
    socket.end();
  });
  socket.on('error', (err) => (error = err));
  socket.write('hi');
  await new Promise((r) => socket.once('close', r));
  expectReply(picks.at(-1)!, got, error, lease.id);
  await until(() => lease.released, 'the lease back');
}

/** What a connection consumer's caller got from its backend: nothing and a reset, or the echo (then maybe the reset after it). */
function expectReply(last: string, got: string, error: unknown, id: string): void {
  if (last.endsWith('/reset')) {
    // Reset by the backend after the connect: the caller's socket errors and closes without a reply.
    expect(got).toBe('');
    expect(error).toMatchObject({ code: 'ECONNRESET' });
  } else {
    expect(got).toBe(`${id}:hi`);
  }
}

/** One operation through a routedStream() socket: connected and echoed, reset by the backend, or refused everywhere. */
async function throughStream(router: Router, attempts: number, fails: boolean, picks: string[]): Promise<void> {
  const socket = routedStream(router, { attempts })();
  let got = '';
  let error: (Error & { code?: string }) | undefined;
  socket.on('connect', () => socket.write('hi'));
  socket.on('data', (d) => {
    got += d.toString();
    socket.end();
  });
  socket.on('error', (err) => (error = err));
  await new Promise((r) => socket.once('close', r));
  if (fails) {
    expect(error?.code).toBe('NoEligibleCandidates');
    expect(got).toBe('');
  } else {
    expectReply(picks.at(-1)!, got, error, picks.at(-1)!.split('/')[0]!);
  }
  await until(() => router.openLeases === 0, 'the lease back');
}

/** One GET through the HTTP dispatcher: `<status> <body>`, or `error` (refused everywhere, or the body cut short). */
async function throughHttp(dispatcher: PoiseDispatcher): Promise<string> {
  try {
    const res = await request('http://api/', { dispatcher });
    return `${res.statusCode} ${await res.body.text()}`;
  } catch {
    return 'error';
  }
}

/** One client through the proxy: echoed by the backend it was spliced to, or closed unanswered (refused everywhere, or reset). */
function throughProxy(port: number): Promise<string> {
  return new Promise((resolve) => {
    let got = '';
    const s = net.connect({ host: '127.0.0.1', port }, () => s.write('hi'));
    s.on('data', (d) => {
      got += d.toString();
      s.end();
    });
    s.on('error', () => {});
    s.on('close', () => resolve(got));
  });
}

/** Each case runs this many times, each on fresh servers and a fresh router (races show in repetition). */
const ROUNDS = Number(process.env['POISE_FAILURE_ROUNDS'] ?? 10);

describe.each(CASES)('failure table: $name', (c) => {
  const attempts = c.attempts ?? 3;
  const failed = c.failed ?? [];

  /** Runs the case ROUNDS times through one connection consumer (one operation: `op`). */
  const connectionConsumer = (op: (router: Router, fails: boolean, picks: string[]) => Promise<void>) => async () => {
    for (let round = 0; round < ROUNDS; round++) {
      const { backends, balancer, router, picks, prepare, close } = await setUp(c);
      try {
        for (let i = 0; i < c.operations; i++) {
          await prepare();
          await op(router, failed.includes(i), picks);
        }
        expectCase(c, picks, backends, balancer);
      } finally {
        await close();
      }
    }
  };

  // A 503 is HTTP's: the connection consumers run every other case.
  if (c.httpOnly !== true) {
    it(
      `through connect() (${ROUNDS} rounds)`,
      connectionConsumer((router, fails, picks) => throughConnect(router, attempts, fails, picks)),
    );

    it(
      `through routedStream() (${ROUNDS} rounds)`,
      connectionConsumer((router, fails, picks) => throughStream(router, attempts, fails, picks)),
    );

    it(`through TcpProxy (${ROUNDS} rounds)`, async () => {
      for (let round = 0; round < ROUNDS; round++) {
        const { backends, balancer, router, picks, prepare, close } = await setUp(c);
        const proxy = new TcpProxy({ router, attempts, logger: silent, port: 0 });
        try {
          const { port } = await proxy.listen();
          const events = { spliced: 0, closed: 0, failed: 0 };
          for (const e of ['spliced', 'closed', 'failed'] as const) proxy.on(e, () => events[e]++);
          for (let op = 0; op < c.operations; op++) {
            await prepare();
            const before = picks.length;
            const reply = await throughProxy(port);
            const last = picks.at(-1)!;
            // Refused everywhere, or reset after the splice: the client is closed unanswered.
            const answered = !failed.includes(op) && !last.endsWith('/reset');
            expect(reply, `operation ${op}`).toBe(answered ? `${last.split('/')[0]}:hi` : '');
            expect(picks.length, `operation ${op} picked`).toBeGreaterThan(before);
            await until(() => events.closed + events.failed === op + 1 && router.openLeases === 0, `operation ${op} accounted for`);
          }
          // Every client either spliced (and closed) or failed, once.
          const spliced = c.operations - failed.length;
          expect(events).toEqual({ spliced, closed: spliced, failed: failed.length });
          expectCase(c, picks, backends, balancer);
        } finally {
          await proxy.close();
          await close();
        }
      }
    });
  }

  it(`through the HTTP dispatcher, GETs (${ROUNDS} rounds)`, async () => {
    const e: Expected = c.http ?? c;
    const httpFailed = e.failed ?? [];
    for (let round = 0; round < ROUNDS; round++) {
      const { backends, balancer, router, picks, prepare, close } = await setUp(c, true);
      const dispatcher = new PoiseDispatcher({ router, origin: 'http://api', attempts });
      try {
        for (let op = 0; op < c.operations; op++) {
          await prepare();
          const reply = await throughHttp(dispatcher);
          const last = picks.at(-1)!;
          const [id, met] = last.split('/');
          const expected =
            httpFailed.includes(op) || met === 'answer-reset' || met === 'reset' ? 'error' : `${met === '503' ? 503 : 200} ${id}`;
          expect(reply, `operation ${op}`).toBe(expected);
          await until(() => router.openLeases === 0, `operation ${op}: its leases back`);
        }
        expectCase({ ...c, ...e, failed: httpFailed }, picks, backends, balancer);
      } finally {
        await dispatcher.destroy();
        await close();
      }
    }
  });
});

function expectCase(c: Expected & { operations: number }, picks: string[], backends: ScriptedBackend[], balancer: Balancer): void {
  expect(picks).toEqual(c.picks);
  expect(picks.length - c.operations).toBe(c.retries);
  const ejections = Object.fromEntries(NAMES.map((n, slot) => [n, balancer.table.stats(slot).ejectionsTotal]));
  expect(ejections).toEqual({ A: 0, B: 0, C: 0, ...c.ejections });
  // The servers saw exactly the dials that were not refused.
  for (const b of backends) expect(b.accepted, b.name).toBe(picks.filter((p) => p.startsWith(b.name) && !p.endsWith('/refused')).length);
}
