/**
 * A frozen Redis (SIGSTOP: the process stays, its connections stay open,
 * nothing answers; SIGCONT: it answers everything queued at once, with a
 * clock that jumped) against the fleet budgets, the membership reader and
 * the publisher, with a real redis-server the test starts on a free port.
 *
 * The connection budget: 3–4 members (in this process: one Balancer, one
 * FleetConnectionBudget and one router each) churning (joining, leaving
 * with and without handing back) through 12 freeze/thaw cycles, half of
 * them longer than the TTL; every member takes connection leases greedily
 * up to a random want and releases random ones. After every lease taken,
 * the leases the members hold sum to at most the budget (limit 12, reserve
 * 2: 10). The freeze lasts a number of missed rounds, not a time: each
 * member's `sync()` settles (undefined, away) within one round deadline.
 * Then the retry budget's local floor on every freeze, the membership
 * reader and publisher (a late write lands on the thaw), and `poise
 * members` (exit 1 at its deadline).
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Rng } from '../../dist/src/core/rng.js';
import { createLogger } from '../../dist/src/log.js';
import { FleetConnectionBudget, FleetRetryBudget, MembershipPublisher, RedisMembership } from '../../dist/src/redis.js';
import { Balancer } from '../../dist/src/runtime/balancer.js';
import type { LoadTable } from '../../src/load/load-table.js';
import type { Lease } from '../../dist/src/runtime/lease.js';
import type { Router } from '../../dist/src/runtime/router.js';
import { runCli } from '../helpers/cli.js';
import { rejection } from '../helpers/thrown.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { until } from '../helpers/until.js';

const logger = createLogger({ level: 'silent' });
const owner = (b: Balancer): LoadTable => (b as unknown as { ownerTable: LoadTable }).ownerTable;
const LIMIT = 12;
const RESERVE = 2;
const BUDGET = LIMIT - RESERVE;
/** Rounds every 200 ms, each command's deadline 200 ms. */
const TTL_MS = 600;
const CYCLES = Number(process.env['POISE_FREEZE_CYCLES'] ?? 12);

let server: TestRedis;
let probe: Redis;
beforeAll(async () => {
  server = await startRedis();
  probe = new Redis(server.url, { lazyConnect: true, enableOfflineQueue: true });
  await probe.connect();
});
afterAll(async () => {
  probe?.disconnect();
  await server?.stop();
});

/** One member of the fleet: what it holds is the leases this test took and has not released. */
interface Member {
  balancer: Balancer;
  budget: FleetConnectionBudget;
  router: Router;
  held: Lease[];
}

describe('a frozen Redis', () => {
  it(`connection budget, ${CYCLES} freeze/thaw cycles (half longer than the TTL), members joining and leaving: the fleet never holds more than the budget`, async () => {
    const cluster = `freeze-${process.pid}-${Date.now()}`;
    const rng = new Rng(20261207n);
    const members: Member[] = [];
    let most = 0;
    let steps = 0;
    const total = (): number => members.reduce((s, m) => s + m.held.length, 0);
    const join = async (): Promise<Member> => {
      const balancer = new Balancer({ capacity: 4, logger });
      balancer.update({ version: 1, cluster, backends: [{ id: 'pg', address: '127.0.0.1:5432' }] });
      const budget = new FleetConnectionBudget({
        balancer,
        url: server.url,
        limitPerBackend: LIMIT,
        reserve: RESERVE,
        ttlMs: TTL_MS,
        logger,
      });
      const m: Member = { balancer, budget, router: balancer.router({ policy: 'round-robin' }), held: [] };
      members.push(m);
      await budget.start();
      return m;
    };
    const leave = async (m: Member): Promise<void> => {
      members.splice(members.indexOf(m), 1);
      for (const l of m.held.splice(0)) l.release('success');
      m.router.close();
      await m.budget.close({ release: rng.coin() });
      m.balancer.close();
    };
    /**
     * Every member sometimes releases one lease (a pool that keeps its connections) and takes leases greedily up to a
     * want above its fair share (so it is always refused, and its demand asks for more); the sum is checked after
     * every lease taken.
     */
    const step = (): void => {
      for (const m of members) {
        if (m.held.length > 0 && rng.below(4) === 0) m.held.splice(rng.below(m.held.length), 1)[0]!.release('success');
        const want = 8 + rng.below(3);
        while (m.held.length < want) {
          let lease: Lease;
          try {
            lease = m.router.acquire({ kind: 'connection' });
          } catch (err) {
            if ((err as { code?: string }).code !== 'Overloaded') throw err;
            break;
          }
          m.held.push(lease);
          most = Math.max(most, total());
          expect(total()).toBeLessThanOrEqual(BUDGET);
        }
        // What the test counts is what the table counts.
        expect(owner(m.balancer).connections(0)).toBe(m.held.length);
      }
      steps++;
    };
    const syncAll = (): Promise<unknown[]> => Promise.all(members.map((m) => m.budget.sync()));
    /** Redis' own clock is past the fence (and the hash holds one). */
    const fenceOver = async (): Promise<boolean> => {
      const [s, us] = await probe.time();
      const f = Number((await probe.hget(`poise:{${cluster}}:budget:v1`, 'f')) ?? 0);
      return Number(s) * 1000 + Math.floor(Number(us) / 1000) > f;
    };
    try {
      for (let k = 0; k < 3; k++) await join();
      for (let cycle = 0; cycle < CYCLES; cycle++) {
        // On Redis: demand moves the shares until the fence (if any) is over.
        await until(
          async () => {
            step();
            await syncAll();
            return fenceOver();
          },
          `cycle ${cycle}: the fence to end`,
          20_000,
        );
        for (let k = 0; k < 3; k++) {
          step();
          await syncAll();
        }
        step();
        server.freeze();
        // Frozen: every round settles away within its deadline; nobody grows. A long freeze is 4 missed rounds of every
        // member (each at least one deadline, a third of the TTL, after the one before), longer than the TTL.
        const missed = cycle % 2 === 0 ? 1 : 4;
        for (let k = 0; k < missed; k++) {
          const shares = members.map((m) => owner(m.balancer).budget.share(0) ?? 0);
          for (const r of await syncAll()) expect(r).toBeUndefined();
          members.forEach((m, i) => {
            expect(m.budget.away).toBe(true);
            expect(owner(m.balancer).budget.share(0) ?? 0).toBeLessThanOrEqual(shares[i]!);
          });
          step();
          // Churn while frozen: a member leaves, one joins (its first round fails: it starts at a share of zero).
          if (rng.below(3) === 0 && members.length > 2) await leave(members[rng.below(members.length)]!);
          if (rng.below(3) === 0 && members.length < 4) {
            const m = await join();
            expect(owner(m.balancer).budget.share(0)).toBe(0);
          }
        }
        // A round of every member sent while frozen and answered on the thaw within its deadline: its reply is applied
        // (the rounds that missed their deadline ran too, first, with every lease past its deadline in Redis' clock).
        const answered = syncAll();
        await new Promise<void>((resolve) => setImmediate(resolve)); // the scripts are written to the sockets
        server.thaw();
        await answered;
        // Thawed: rounds go on, members keep taking and churning.
        for (let k = 0; k < 6; k++) {
          step();
          await syncAll();
          if (k === 2 && rng.below(3) === 0 && members.length > 2) await leave(members[rng.below(members.length)]!);
          if (k === 3 && rng.below(3) === 0 && members.length < 4) await join();
        }
      }
      // The budget was in use, and used up: the law above was not met by holding nothing.
      expect(most).toBe(BUDGET);
      expect(steps).toBeGreaterThan(CYCLES * 10);
    } finally {
      server.thaw();
      for (const m of [...members]) await leave(m);
    }
  });

  it('retry budget: each freeze puts every process on its local floor within one round deadline, and sync() settles; back on Redis the floor is shared again', async () => {
    const cluster = `freeze-retry-${process.pid}-${Date.now()}`;
    // 1 retry/s over 10 s: a floor of 10; no ratio, so a process's allowance is its floor share alone.
    const budget = { ratio: 0, minRetriesPerSecond: 1, ttlMs: 10_000 };
    const balancers = [0, 1, 2].map(() => new Balancer({ capacity: 4, logger, retryBudget: budget }));
    const fleets = balancers.map((balancer) => new FleetRetryBudget({ balancer, cluster, url: server.url, logger, intervalMs: 200 }));
    try {
      for (const f of fleets) await f.start();
      for (const f of fleets) await f.sync();
      for (const b of balancers) expect(b.retryBudgetStats().processes).toBe(3);
      for (let cycle = 0; cycle < 6; cycle++) {
        server.freeze();
        // The scheduled rounds fall back on their own: wait for it (each round settles within its deadline).
        for (const b of balancers) await until(() => b.retryBudgetStats().processes === 1, `cycle ${cycle}: the local floor`, 20_000);
        for (const b of balancers) expect(b.retryBudgetStats()).toMatchObject({ processes: 1, available: 10 });
        for (const f of fleets) {
          expect(await f.sync()).toBeUndefined();
          expect(f.fleet).toBeUndefined();
        }
        server.thaw();
        await until(
          async () => (await Promise.all(fleets.map((f) => f.sync()))).every((c) => c?.processes === 3),
          `cycle ${cycle}: the floor shared again`,
          20_000,
        );
        for (const b of balancers) expect(b.retryBudgetStats().processes).toBe(3);
      }
    } finally {
      server.thaw();
      for (const f of fleets) await f.close();
      for (const b of balancers) b.close();
    }
  });

  it('membership: a write to a frozen Redis fails Unavailable at its deadline saying it may still be applied; the reader keeps its membership and follows on the thaw', async () => {
    const cluster = `freeze-members-${process.pid}-${Date.now()}`;
    const redisOptions = { commandTimeout: 300 };
    // Whole-snapshot notices: a write is one script, with no read before it (a delta write reads the base first).
    const pub = new MembershipPublisher({ url: server.url, cluster, logger, redisOptions, notices: 'full' });
    const reader = new RedisMembership({ url: server.url, cluster, logger, redisOptions });
    const doc = (ids: string[]) => ({ cluster, backends: ids.map((id, i) => ({ id, address: `10.0.0.${i + 1}:5432` })) });
    const seen: number[] = [];
    try {
      expect(await pub.apply(doc(['a']))).toBe(1);
      await reader.start((snap) => {
        seen.push(snap.version);
      });
      expect(seen).toEqual([1]);
      server.freeze();
      const err = await rejection(pub.add({ id: 'b', address: '10.0.0.2:5432' }));
      expect(err.code).toBe('Unavailable');
      expect(err.message).toContain('no reply within 300 ms');
      // The read of a re-read has a deadline too: it fails and is retried, and the membership held stays.
      reader.resync('test');
      const write = rejection(pub.apply(doc(['a', 'c'])));
      expect((await write).message).toContain('may still be applied');
      expect(seen).toEqual([1]);
      server.thaw();
      // The write sent before its deadline ran on the thaw; the reader follows it (notice or re-read).
      await until(() => seen.at(-1) === 2, 'the reader to take the late write');
      expect((await pub.show())?.document.backends.map((b) => b.id)).toEqual(['a', 'c']);
      expect(await pub.drain('a')).toBe(3);
      await until(() => seen.at(-1) === 3, 'the reader to follow the next write');
    } finally {
      server.thaw();
      await reader.close();
      await pub.close();
    }
  });

  it('poise members against a frozen Redis: exit 1 at the deadline, naming it, instead of hanging', async () => {
    const cluster = `freeze-cli-${process.pid}-${Date.now()}`;
    const members = (...args: string[]) => runCli(['members', ...args, '--redis', server.url, '--cluster', cluster]);
    expect((await members('add', 'a', '10.0.0.1:5432')).code).toBe(0);
    server.freeze();
    try {
      const [show, drain] = await Promise.all([members('show'), members('drain', 'a')]);
      expect(show.code).toBe(1);
      // The publisher's deadline: 5000 ms + the default waitTimeoutMs (1000).
      expect(show.stderr).toContain('unavailable (no reply within 6000 ms: Redis frozen or unreachable); nothing read');
      expect(drain.code).toBe(1);
      expect(drain.stderr).toContain('no reply within 6000 ms');
    } finally {
      server.thaw();
    }
    expect((await members('drain', 'a')).code).toBe(0);
  });
});
