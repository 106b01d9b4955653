/**
 * A late joiner of the fleet connection budget (issue 36): process A took
 * all 8 connections of a backend and keeps them open in its pool, idle;
 * process B joins. Rounds are driven by hand (a TTL of an hour: no scheduled
 * round interferes), alternately A then B, and counted; the sockets' idle
 * time is an injected clock. With the hand-back (`routedStream`'s
 * `handBack`), B holds its fair 4 after 3 rounds of each after its first —
 * one TTL, rounds running every TTL / 3 — and the shares then stay at 4 and
 * 4; without it, B still has nothing after the same rounds. The backend
 * never has more than 8 connections open.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../dist/src/log.js';
import { routedStream, type RoutedSocket } from '../../dist/src/outbound/routed-stream.js';
import { FleetConnectionBudget } from '../../dist/src/redis.js';
import { Balancer } from '../../dist/src/runtime/balancer.js';
import type { Router } from '../../dist/src/runtime/router.js';
import type { LoadTable } from '../../src/load/load-table.js';
import { echoServer, type EchoServer } from '../helpers/echo-server.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { manualClock } from '../helpers/runtime.js';
import { until } from '../helpers/until.js';

const logger = createLogger({ level: 'silent' });
const owner = (b: Balancer): LoadTable => (b as unknown as { ownerTable: LoadTable }).ownerTable;
const LIMIT = 8;
const IDLE_MS = 50;

let redis: TestRedis;
let db: EchoServer;
beforeAll(async () => {
  redis = await startRedis();
  db = await echoServer('db');
});
afterAll(async () => {
  await db?.close();
  await redis?.stop();
});

/** A process of the fleet: its budget and a pool of routed sockets it keeps open (idle after each query). */
class Member {
  readonly balancer = new Balancer({ capacity: 4, logger });
  readonly budget: FleetConnectionBudget;
  readonly router: Router;
  readonly open: (() => RoutedSocket) | undefined;
  readonly pool: RoutedSocket[] = [];
  rounds = 0;

  constructor(cluster: string, clock: () => number, handBack: boolean) {
    this.balancer.update({ version: 1, cluster, backends: [{ id: 'db', address: `127.0.0.1:${db.port}` }] });
    this.budget = new FleetConnectionBudget({ balancer: this.balancer, url: redis.url, limitPerBackend: LIMIT, ttlMs: 3_600_000, logger });
    this.router = this.balancer.router({ leaseKind: 'connection' });
    this.open = routedStream(this.router, { attempts: 1, clock, ...(handBack ? { handBack: { idleMs: IDLE_MS } } : {}) });
  }

  get share(): number {
    return owner(this.balancer).budget.share(0) ?? 0;
  }

  get held(): number {
    return owner(this.balancer).connections(0);
  }

  async round(): Promise<void> {
    await this.budget.sync();
    this.rounds++;
  }

  /** Opens connections up to `want` (those refused at the share count as demand) and runs one query on each new one. */
  async fill(want: number): Promise<void> {
    const opened: Promise<RoutedSocket | undefined>[] = [];
    for (let k = this.pool.filter((s) => !s.destroyed).length; k < want; k++) {
      const s = this.open!();
      opened.push(
        new Promise((resolve) => {
          s.once('error', () => resolve(undefined));
          s.once('connect', () => {
            s.once('data', () => resolve(s));
            s.write('q');
          });
        }),
      );
    }
    for (const s of await Promise.all(opened)) if (s !== undefined) this.pool.push(s);
  }

  async close(): Promise<void> {
    for (const s of this.pool) s.destroy();
    await this.budget.close({ release: true });
    this.router.close();
    this.balancer.close();
  }
}

async function lateJoiner(handBack: boolean): Promise<{ a: Member; b: Member; bRounds: number; shares: [number, number][] }> {
  const cluster = `late-${randomBytes(4).toString('hex')}`;
  const clock = manualClock();
  const a = new Member(cluster, clock.now, handBack);
  const b = new Member(cluster, clock.now, handBack);
  let most = 0;
  const watch = setInterval(() => {
    most = Math.max(most, db.open());
  }, 1);
  try {
    await a.budget.start();
    expect(a.share).toBe(LIMIT);
    await a.fill(LIMIT);
    expect(a.held).toBe(LIMIT);
    // B joins: its first round, then its pool asks for its 4 and is refused.
    await b.budget.start();
    b.rounds = 1;
    await b.fill(4);
    expect(b.held).toBe(0);
    while (b.share < 4 && b.rounds < 8) {
      await a.round();
      // A's connections have been idle for IDLE_MS: the hand-back ends those above A's share (waited for, if any).
      clock.advance(IDLE_MS);
      if (handBack) await until(() => a.held <= a.share, 'A to hand its idle connections back down to its share');
      await b.fill(4);
      await b.round();
      expect(a.held + b.held).toBeLessThanOrEqual(LIMIT);
    }
    const bRounds = b.rounds;
    await b.fill(4);
    // Steady demands: the shares stay where they are, round after round (no oscillation).
    const shares: [number, number][] = [];
    for (let k = 0; k < 6; k++) {
      await a.round();
      await b.round();
      await b.fill(4);
      shares.push([a.share, b.share]);
    }
    expect(most).toBeLessThanOrEqual(LIMIT);
    return { a, b, bRounds, shares };
  } finally {
    clearInterval(watch);
    await a.close();
    await b.close();
  }
}

describe('fleet connection budget: a late joiner', () => {
  it('with the hand-back: B holds its fair 4 of 8 after 3 rounds of each after its first (one TTL), and the split then stays 4 / 4', async () => {
    const { bRounds, shares, a } = await lateJoiner(true);
    // B's first round is its start; 3 more of A and of B, alternately, bring it its slice.
    expect(bRounds).toBe(4);
    expect(a.rounds).toBe(3 + 6);
    for (const s of shares) expect(s).toEqual([4, 4]);
  });

  it('without it: after the same rounds B still has nothing (A keeps its 8 idle connections)', async () => {
    const { bRounds, shares } = await lateJoiner(false);
    expect(bRounds).toBe(8);
    for (const s of shares) expect(s[1]).toBe(0);
  });
});
