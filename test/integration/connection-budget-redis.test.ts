/**
 * The fleet connection budget's Lua script against a real Redis (127.0.0.1:6379,
 * a fresh hash per case), and FleetConnectionBudget against a Redis the test
 * starts, kills and restarts.
 */
import { randomBytes } from 'node:crypto';
import fc from 'fast-check';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BUDGET_SCRIPT } from '../../dist/src/membership/redis-script.js';
import { FleetConnectionBudget } from '../../dist/src/redis.js';
import { Balancer } from '../../dist/src/runtime/balancer.js';
import { createLogger } from '../../dist/src/log.js';
import type { LoadTable } from '../../src/load/load-table.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { until } from '../helpers/until.js';

const owner = (b: Balancer): LoadTable => (b as unknown as { ownerTable: LoadTable }).ownerTable;
const silent = createLogger({ level: 'silent' });

type Budget = (
  key: string,
  proc: string,
  ttl: number,
  budget: number,
  heldBefore: number,
  n: number,
  ...rest: (string | number)[]
) => Promise<string[]>;

let redis: Redis;
let call: Budget;

beforeAll(() => {
  redis = new Redis({ host: '127.0.0.1', port: 6379, lazyConnect: false });
  redis.defineCommand('poiseBudget', { lua: BUDGET_SCRIPT, numberOfKeys: 1 });
  call = (redis as unknown as { poiseBudget: Budget }).poiseBudget.bind(redis);
});
afterAll(() => redis.quit());

const freshKey = (): string => `poise-test:{b${randomBytes(6).toString('hex')}}:budget:v1`;
/** Process ids the script sorts by: p0 < p1 < ... (hex). */
const proc = (i: number): string => `a${i.toString(16).padStart(4, '0')}`;

/** Runs `fn` on a fresh hash, deleted afterwards. */
async function onFreshKey(fn: (key: string) => Promise<void>): Promise<void> {
  const key = freshKey();
  try {
    await fn(key);
  } finally {
    await redis.del(key);
  }
}

/** The share each process of a key holds now (its last grant): what a real process reports at its next round. */
const holds = new Map<string, number>();

/** One round of process `p` for backend `pg`, reporting the share it holds (its last grant); returns its grant. */
async function round(key: string, p: number, budget: number, demand: number, inUse: number, ttl = 60_000): Promise<number> {
  const mine = holds.get(`${key}/${p}`);
  const reply = await call(key, proc(p), ttl, budget, mine === undefined ? 0 : 1, 1, 'pg', demand, inUse, mine ?? 0);
  const grant = Number(reply[2]);
  holds.set(`${key}/${p}`, grant);
  return grant;
}

/** Σ of the shares stored for backend `pg`. */
async function storedSum(key: string): Promise<number> {
  const h = await redis.hgetall(key);
  let sum = 0;
  for (const [f, v] of Object.entries(h)) if (f.startsWith('s:') && f.endsWith(':pg')) sum += Number(v);
  return sum;
}

describe('BUDGET_SCRIPT: the split', () => {
  it('property: whatever order processes renew in and whatever they hold, Σ stored shares ≤ limit − reserve after every call', async () => {
    const step = fc.record({ p: fc.nat({ max: 7 }), demand: fc.nat({ max: 40 }), closeFrac: fc.double({ min: 0, max: 1, noNaN: true }) });
    await fc.assert(
      fc.asyncProperty(fc.integer({ min: 1, max: 50 }), fc.array(step, { minLength: 1, maxLength: 60 }), async (budget, steps) => {
        const key = freshKey();
        const grant = new Map<number, number>();
        const held = new Map<number, number>();
        try {
          for (const s of steps) {
            // A process holds at most what its last share allowed it to open (or what it held when the share shrank).
            const most = Math.max(grant.get(s.p) ?? 0, held.get(s.p) ?? 0);
            const inUse = Math.floor(most * s.closeFrac);
            const g = await round(key, s.p, budget, s.demand + inUse, inUse);
            expect(g).toBeGreaterThanOrEqual(0);
            grant.set(s.p, g);
            held.set(s.p, inUse);
            expect(await storedSum(key)).toBeLessThanOrEqual(budget);
          }
        } finally {
          await redis.del(key);
        }
      }),
      { numRuns: 60 },
    );
  });

  it('property: with demands steady, three rounds each settle on a max-min fair split that spends the whole budget', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.integer({ min: 1, max: 60 }),
        fc.array(fc.nat({ max: 30 }), { minLength: 1, maxLength: 8 }),
        async (budget, demands) => {
          const key = freshKey();
          try {
            const g: number[] = [];
            // Three: a shrink is stored from the round after the one that granted it (the process reports it applied it).
            for (let pass = 0; pass < 3; pass++)
              for (let p = 0; p < demands.length; p++) g[p] = await round(key, p, budget, demands[p]!, 0);
            const n = demands.length;
            expect(g.reduce((a, b) => a + b, 0)).toBe(budget);
            for (let p = 0; p < n; p++) {
              // Every process at least 1 when the budget allows, and at least its demand up to the even split.
              if (budget >= n) expect(g[p]).toBeGreaterThanOrEqual(1);
              expect(g[p]).toBeGreaterThanOrEqual(Math.min(Math.max(demands[p]!, 1), Math.floor(budget / n)));
              // Demand moves shares: more demand never gets less (one connection of remainder aside).
              for (let q = 0; q < n; q++) if (demands[p]! > demands[q]!) expect(g[p]).toBeGreaterThanOrEqual(g[q]! - 1);
            }
          } finally {
            await redis.del(key);
          }
        },
      ),
      { numRuns: 80 },
    );
  });

  it('demand moves shares: 35 split 3 ways, then one process wants more and takes it once the others hand theirs back', async () => {
    const key = freshKey();
    try {
      const g = [0, 0, 0];
      for (let pass = 0; pass < 3; pass++) for (let p = 0; p < 3; p++) g[p] = await round(key, p, 35, 0, 0);
      expect(g).toEqual([12, 12, 11]);
      // p0 holds its 12 and was refused 20 more; p1 and p2 want 2 each.
      g[0] = await round(key, 0, 35, 32, 12);
      expect(g[0]).toBe(12); // nothing handed back yet
      g[1] = await round(key, 1, 35, 2, 2);
      g[2] = await round(key, 2, 35, 2, 2);
      expect([g[1], g[2]]).toEqual([2, 2]);
      // Their shrinks count from their next round, which reports the smaller share (a lost reply cannot under-record).
      g[0] = await round(key, 0, 35, 32, 12);
      expect(g[0]).toBe(12);
      g[1] = await round(key, 1, 35, 2, 2);
      g[2] = await round(key, 2, 35, 2, 2);
      g[0] = await round(key, 0, 35, 32, 12);
      expect(g).toEqual([31, 2, 2]);
      expect(await storedSum(key)).toBe(35);
    } finally {
      await redis.del(key);
    }
  });

  it('a process that stops renewing loses its share after the TTL, and the survivors grow into it', async () => {
    const key = freshKey();
    try {
      const ttl = 300;
      expect(await round(key, 0, 10, 10, 0, ttl)).toBe(10);
      expect(await round(key, 1, 10, 10, 0, 60_000)).toBe(0); // p0 holds all 10
      await until(async () => (await round(key, 1, 10, 10, 0, 60_000)) === 10, 'p0 lease to expire and p1 to take the 10', 5000, 50);
      const fields = Object.keys(await redis.hgetall(key));
      expect(fields.some((f) => f.includes(proc(0)))).toBe(false);
    } finally {
      await redis.del(key);
    }
  });

  it('the rank is the aperture coordinate; a process that never held a share creates the hash unfenced', async () => {
    const key = freshKey();
    try {
      const r1 = await call(key, proc(1), 60_000, 40, 0, 1, 'pg', 40, 3, 0);
      expect(r1.slice(0, 3)).toEqual(['1', '0', '40']);
      const reply = await call(key, proc(0), 60_000, 40, 0, 1, 'pg', 0, 0, 0);
      expect(reply.slice(0, 2)).toEqual(['2', '0']);
      const again = await call(key, proc(1), 60_000, 40, 1, 1, 'pg', 40, 3, 40);
      expect(again.slice(0, 2)).toEqual(['2', '1']);
    } finally {
      await redis.del(key);
    }
  });
});

describe('BUDGET_SCRIPT: the fence', () => {
  const ttl = 60_000;
  /** Redis' own clock, ms. */
  const serverNow = async (): Promise<number> => {
    const [s, us] = await redis.time();
    return Number(s) * 1000 + Math.floor(Number(us) / 1000);
  };

  it('a gap of more than TTL / 2 with a lease live before it: for one TTL no lease expires and nobody grows past the share it reports', () =>
    onFreshKey(async (key) => {
      // p0 and p1 hold 5 each of 10.
      for (let pass = 0; pass < 3; pass++) for (const p of [0, 1]) await round(key, p, 10, 5, 0, ttl);
      expect(holds.get(`${key}/0`)).toBe(5);
      // Redis stood still for 2 TTLs (a SIGSTOP): every lease is past its deadline when it answers again.
      const now = await serverNow();
      await redis.hset(key, 't', String(now - 2 * ttl), `p:${proc(0)}`, String(now - ttl), `p:${proc(1)}`, String(now - ttl));
      // p0's queued round runs first, wanting all 10: p1's lease is kept (its 5 still counted) and p0 stays at its 5.
      expect(await round(key, 0, 10, 10, 5, ttl)).toBe(5);
      expect(await redis.hget(key, `s:${proc(1)}:pg`)).toBe('5');
      const fence = Number(await redis.hget(key, 'f'));
      expect(fence).toBeGreaterThanOrEqual(now + ttl);
      expect(fence).toBeLessThanOrEqual((await serverNow()) + ttl);
      // A newcomer during the fence gets nothing; p1 gets no more than its 5 (its target among three is 3: a shrink).
      expect(await round(key, 2, 10, 5, 0, ttl)).toBe(0);
      expect(await round(key, 1, 10, 9, 5, ttl)).toBe(3);
      expect(await storedSum(key)).toBe(10);
      // The fence ends (moved into the past here): the split resumes, within the budget.
      await redis.hset(key, 'f', String((await serverNow()) - 1));
      for (let pass = 0; pass < 3; pass++) {
        for (const p of [0, 1, 2]) await round(key, p, 10, 10, 0, ttl);
        expect(await storedSum(key)).toBeLessThanOrEqual(10);
      }
      expect([0, 1, 2].map((p) => holds.get(`${key}/${p}`))).toEqual([3, 3, 4]);
    }));

  it('a gap whose leases had all expired before it (a fleet that stopped) raises no fence; a gap of at most TTL / 2 none either', () =>
    onFreshKey(async (key) => {
      await call(key, proc(0), ttl, 10, 0, 1, 'pg', 3, 0, 0);
      let now = await serverNow();
      await redis.hset(key, 't', String(now - ttl / 2 + 1000));
      expect((await call(key, proc(0), ttl, 10, 1, 1, 'pg', 10, 3, 3))[2]).toBe('10');
      expect(Number(await redis.hget(key, 'f'))).toBe(0);
      now = await serverNow();
      await redis.hset(key, 't', String(now - 3 * ttl), `p:${proc(0)}`, String(now - 4 * ttl));
      expect((await call(key, proc(1), ttl, 10, 0, 1, 'pg', 10, 0, 0))[2]).toBe('10');
      expect(Number(await redis.hget(key, 'f'))).toBe(0);
    }));

  it('the hash gone (a restart, a flush) while the caller held a share: fenced; a newcomer creating it: not', () =>
    onFreshKey(async (key) => {
      expect((await call(key, proc(0), ttl, 10, 1, 1, 'pg', 10, 2, 3))[2]).toBe('3');
      expect(Number(await redis.hget(key, 'f'))).toBeGreaterThan(0);
      const other = freshKey();
      try {
        expect((await call(other, proc(0), ttl, 10, 0, 1, 'pg', 10, 0, 0))[2]).toBe('10');
      } finally {
        await redis.del(other);
      }
    }));

  it('a reply lost to a deadline cannot under-record: the share stored is never below the share the caller reports', () =>
    onFreshKey(async (key) => {
      await call(key, proc(0), ttl, 10, 0, 1, 'pg', 10, 0, 0);
      await call(key, proc(0), ttl, 10, 1, 1, 'pg', 10, 0, 10);
      // p1 arrives wanting 10: p0's target falls to 5, but p0 reports the 10 it may still hold (the reply may be lost).
      await call(key, proc(1), ttl, 10, 0, 1, 'pg', 10, 0, 0);
      expect((await call(key, proc(0), ttl, 10, 1, 1, 'pg', 10, 0, 10))[2]).toBe('5');
      expect(await redis.hget(key, `s:${proc(0)}:pg`)).toBe('10');
      expect((await call(key, proc(1), ttl, 10, 1, 1, 'pg', 10, 0, 0))[2]).toBe('0');
      // p0's next round reports the 5 it applied: now p1 can take the rest.
      await call(key, proc(0), ttl, 10, 1, 1, 'pg', 10, 0, 5);
      expect((await call(key, proc(1), ttl, 10, 1, 1, 'pg', 10, 0, 0))[2]).toBe('5');
    }));
});

describe('FleetConnectionBudget', () => {
  let server: TestRedis;
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(() => server.stop());

  function fleetOf(n: number, cluster: string, ttlMs: number): { balancers: Balancer[]; budgets: FleetConnectionBudget[] } {
    const balancers = Array.from({ length: n }, () => {
      const b = new Balancer({ capacity: 4, logger: silent });
      b.update({ version: 1, cluster, backends: [{ id: 'pg', address: '127.0.0.1:5432' }] });
      return b;
    });
    const budgets = balancers.map(
      (balancer) => new FleetConnectionBudget({ balancer, url: server.url, limitPerBackend: 40, reserve: 5, ttlMs, logger: silent }),
    );
    return { balancers, budgets };
  }

  it('shares go into the table; they sum to the budget; while Redis is away and for one TTL after it restarts (the fence) nobody grows', async () => {
    const cluster = `c${randomBytes(4).toString('hex')}`;
    const ttlMs = 1500;
    const { balancers, budgets } = fleetOf(3, cluster, ttlMs);
    try {
      // Before the first round a budgeted backend has a share of zero.
      const share = (k: number): number | undefined => owner(balancers[k]!).budget.share(0);
      for (const b of budgets) await b.start();
      for (let pass = 0; pass < 2; pass++) for (const b of budgets) await b.sync();
      const sum = (): number => [0, 1, 2].reduce((s, k) => s + (share(k) ?? 0), 0);
      expect(sum()).toBe(35);
      expect(budgets.map((b) => b.last!.processes)).toEqual([3, 3, 3]);
      expect(new Set(budgets.map((b) => b.last!.rank))).toEqual(new Set([0, 1, 2]));
      const before = [0, 1, 2].map(share);
      // Process 0 wants much more: it was refused 100 times.
      for (let k = 0; k < 100; k++) owner(balancers[0]!).budget.refused(0);
      await server.kill();
      expect(await budgets[0]!.sync()).toBeUndefined();
      expect(budgets[0]!.away).toBe(true);
      expect(share(0)).toBe(before[0]); // kept, not grown
      await server.restart();
      await until(async () => (await budgets[0]!.sync()) !== undefined, 'process 0 back on Redis', 10_000, 50);
      // The hash is gone and process 0 held a share: the fence. The fresh server holds no other lease, yet process 0 does
      // not grow past its last share.
      expect(share(0)).toBeLessThanOrEqual(before[0]!);
      for (const k of [1, 2]) await until(async () => (await budgets[k]!.sync()) !== undefined, `process ${k} back`, 10_000, 50);
      expect(sum()).toBeLessThanOrEqual(35);
      for (let k = 0; k < 100; k++) owner(balancers[0]!).budget.refused(0);
      await budgets[0]!.sync();
      expect(share(0)).toBeLessThanOrEqual(before[0]!);
      // After the hold the demand moves the shares: process 0 grows once the others have handed theirs back.
      await until(
        async () => {
          for (let k = 0; k < 100; k++) owner(balancers[0]!).budget.refused(0);
          for (const b of budgets) await b.sync();
          return (share(0) ?? 0) > before[0]!;
        },
        'process 0 to grow after the hold',
        10_000,
        100,
      );
      expect(sum()).toBeLessThanOrEqual(35);
    } finally {
      for (const b of budgets) await b.close();
      for (const b of balancers) b.close();
    }
  });

  it('a closed process (release) hands its share back at once; a backend that joins starts at a zero share until its round', async () => {
    const cluster = `c${randomBytes(4).toString('hex')}`;
    const { balancers, budgets } = fleetOf(2, cluster, 60_000);
    try {
      for (const b of budgets) await b.start();
      for (const b of budgets) await b.sync();
      await budgets[1]!.close({ release: true });
      // Demand beyond the even split, so the survivor asks for the whole budget.
      for (let k = 0; k < 50; k++) owner(balancers[0]!).budget.refused(0);
      await budgets[0]!.sync();
      expect(owner(balancers[0]!).budget.share(0)).toBe(35);
      balancers[0]!.update({
        version: 2,
        cluster,
        backends: [
          { id: 'pg', address: '127.0.0.1:5432' },
          { id: 'pg2', address: '127.0.0.1:5433' },
        ],
      });
      const slot = (balancers[0] as unknown as { slotEntries(): { id: string; slot: number }[] })
        .slotEntries()
        .find((e) => e.id === 'pg2')!.slot;
      expect(owner(balancers[0]!).budget.share(slot)).toBe(0);
      await until(() => owner(balancers[0]!).budget.share(slot) === 35, 'the new backend to be granted its share');
    } finally {
      for (const b of budgets) await b.close();
      for (const b of balancers) b.close();
    }
  });
  it("without its own limit it follows the Balancer's document block: the limit moves with the document, false lifts the budget", async () => {
    const cluster = `c${randomBytes(4).toString('hex')}`;
    const balancer = new Balancer({ capacity: 4, logger: silent });
    const doc = (version: number, connectionBudget: unknown) => ({
      version,
      cluster,
      backends: [{ id: 'pg', address: '127.0.0.1:5432' }],
      connectionBudget,
    });
    balancer.update(doc(1, { limitPerBackend: 12, reserve: 2, ttlMs: 60_000 }));
    const budget = new FleetConnectionBudget({ balancer, url: server.url, logger: silent });
    try {
      await budget.start();
      expect(owner(balancer).budget.share(0)).toBe(10);
      balancer.update(doc(2, { limitPerBackend: 30, reserve: 5, ttlMs: 60_000 }));
      await until(() => owner(balancer).budget.share(0) === 25, 'the share to follow the new limit');
      balancer.update(doc(3, false));
      await until(() => owner(balancer).budget.share(0) === undefined, 'the budget to be lifted');
      expect(() => new FleetConnectionBudget({ balancer, url: server.url, reserve: 3 })).toThrow(
        'options.limitPerBackend: is required with options.reserve or options.ttlMs',
      );
    } finally {
      await budget.close();
      balancer.close();
    }
  });
});
