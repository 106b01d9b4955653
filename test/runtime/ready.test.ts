// balancer.ready() and acquireAsync({ intent }) before the first verdicts:
// custom checks and a postgres roles check through a scripted client answer
// when the test says, so "before" and "after" each verdict are exact. The
// deadline of ready() runs on ManualTimers. The same against a real primary
// and replica, with the router in a worker thread:
// test/integration/ready-pg.test.ts.
import { afterEach, describe, expect, it } from 'vitest';
import type { CheckTarget, HealthCheckOptions } from '../../src/health/config.js';
import { createLogger } from '../../src/log.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { ManualTimers } from '../helpers/manual-timers.js';
import { rejection, thrown } from '../helpers/thrown.js';
import { until } from '../helpers/until.js';

const logger = createLogger({ level: 'silent' });
const open: Balancer[] = [];
afterEach(() => {
  for (const b of open.splice(0)) b.close();
});

/** A custom check whose every probe waits until the test answers it (by backend id). */
function scripted(): { check: (t: CheckTarget) => Promise<boolean>; asked(id: string): boolean; answer(id: string, up: boolean): void } {
  const waiting = new Map<string, (up: boolean) => void>();
  return {
    check: (t) => new Promise<boolean>((resolve) => waiting.set(t.id, resolve)),
    asked: (id) => waiting.has(id),
    answer(id, up) {
      const r = waiting.get(id);
      if (r === undefined) throw new Error(`${id} was not asked`);
      waiting.delete(id);
      r(up);
    },
  };
}

/** A promise's state, readable without awaiting it. */
function watch<T>(p: Promise<T>): { state: 'pending' | 'resolved' | 'rejected'; value?: T; error?: unknown } {
  const w: { state: 'pending' | 'resolved' | 'rejected'; value?: T; error?: unknown } = { state: 'pending' };
  p.then(
    (v) => Object.assign(w, { state: 'resolved', value: v }),
    (e: unknown) => Object.assign(w, { state: 'rejected', error: e }),
  );
  return w;
}

/** A few event-loop turns: every wake-up already due (a notify, a resolved check) has run after it. */
async function turns(n = 5): Promise<void> {
  for (let i = 0; i < n; i++) await new Promise((r) => setImmediate(r));
}

function balancer(check?: HealthCheckOptions): Balancer {
  const b = new Balancer({ capacity: 16, logger, ...(check === undefined ? {} : { health: { check } }) });
  open.push(b);
  return b;
}

const custom = (s: ReturnType<typeof scripted>): HealthCheckOptions => ({
  kind: 'custom',
  check: s.check,
  intervalMs: 600_000,
  jitterPercent: 0,
  rise: 1,
  fall: 1,
  timeoutMs: 600_000,
});
const backends = (ids: string[]) => ids.map((id, i) => ({ id, address: `127.0.0.1:${7000 + i}` }));

describe('balancer.ready(): every backend of the membership in force has its first verdict', () => {
  it('resolves exactly when the last backend’s first check lands, not at the first or second', async () => {
    const s = scripted();
    const b = balancer(custom(s));
    b.update(backends(['a', 'b', 'c']));
    const ready = watch(b.ready());
    await until(() => s.asked('a') && s.asked('b') && s.asked('c'), 'the three first checks');
    s.answer('b', true);
    s.answer('a', true);
    await turns();
    expect(ready.state).toBe('pending');
    s.answer('c', true);
    await until(() => ready.state !== 'pending', 'ready to settle');
    expect(ready.state).toBe('resolved');
  });

  it('a failed first check is a verdict (the backend is down, and known to be)', async () => {
    const s = scripted();
    const b = balancer(custom(s));
    b.update(backends(['a', 'b']));
    const ready = watch(b.ready());
    await until(() => s.asked('a') && s.asked('b'), 'the first checks');
    s.answer('a', false);
    s.answer('b', true);
    await until(() => ready.state !== 'pending', 'ready to settle');
    expect(ready.state).toBe('resolved');
    expect(b.healthStats().backends.find((x) => x.id === 'a')!.check).toBe('down');
  });

  it('a backend added later awaits its own first verdict; a removed one stops counting; routing never waits for either', async () => {
    const s = scripted();
    const b = balancer(custom(s));
    b.update(backends(['a']));
    await until(() => s.asked('a'), 'the first check of a');
    s.answer('a', true);
    await b.ready();
    b.update(backends(['a', 'd']));
    // d is routable at once (up until a check says otherwise): a pending verdict excludes nobody.
    const r = b.router({ policy: 'round-robin' });
    const ids = new Set([0, 1, 2, 3].map(() => r.acquire()).map((l) => (l.release('success'), l.id)));
    expect(ids).toEqual(new Set(['a', 'd']));
    const again = watch(b.ready());
    await until(() => s.asked('d'), 'the first check of d');
    await turns();
    expect(again.state).toBe('pending');
    s.answer('d', true);
    await until(() => again.state !== 'pending', 'ready to settle');
    expect(again.state).toBe('resolved');
    // e joins and leaves before its first check lands: a ready() in progress stops waiting for it.
    b.update(backends(['a', 'd', 'e']));
    const third = watch(b.ready());
    await until(() => s.asked('e'), 'the first check of e');
    await turns();
    expect(third.state).toBe('pending');
    b.update(backends(['a', 'd']));
    await until(() => third.state !== 'pending', 'ready to settle');
    expect(third.state).toBe('resolved');
  });

  it('rejects with NotReady at its deadline (injected timers), naming each backend still waiting and what for', async () => {
    const s = scripted();
    const b = balancer(custom(s));
    b.update(backends(['a', 'b', 'c']));
    const timers = new ManualTimers();
    const ready = watch(b.ready({ timeoutMs: 5000, timers }));
    await until(() => s.asked('a') && s.asked('b') && s.asked('c'), 'the first checks');
    s.answer('a', true);
    await until(() => b.ownerTable.verdicts.pending(b.slotEntries().find((e) => e.id === 'a')!.slot) === 0, 'a settled');
    await timers.advance(4999);
    await turns();
    expect(ready.state).toBe('pending');
    await timers.advance(1);
    expect(ready.state).toBe('rejected');
    const err = ready.error as { code: string; message: string };
    expect(err.code).toBe('NotReady');
    expect(err.message).toBe('balancer.ready: after 5000 ms still without a first verdict: b (active check), c (active check)');
    expect(timers.pending).toBe(0);
  });

  it('without health configuration: resolves once a membership is applied, and names the missing membership at its deadline', async () => {
    const b = balancer();
    const timers = new ManualTimers();
    const late = watch(b.ready({ timeoutMs: 100, timers }));
    await timers.advance(100);
    expect((late.error as Error).message).toBe(
      'balancer.ready: after 100 ms still without a first verdict: a membership (none applied yet)',
    );
    const ready = watch(b.ready());
    await turns();
    expect(ready.state).toBe('pending');
    b.update(backends(['a']));
    await until(() => ready.state !== 'pending', 'ready to settle');
    expect(ready.state).toBe('resolved');
  });

  it('waits for ORCA load polls where configured, naming them', async () => {
    const b = new Balancer({
      capacity: 8,
      logger,
      clock: () => 1000,
      health: { orca: { intervalMs: 60_000 } },
    });
    open.push(b);
    b.update(backends(['a']));
    const timers = new ManualTimers();
    const ready = watch(b.ready({ timeoutMs: 10, timers }));
    await timers.advance(10);
    expect((ready.error as Error).message).toBe('balancer.ready: after 10 ms still without a first verdict: a (orca load report)');
    // An injected clock polls only when asked: the poll (refused: nothing listens) is the verdict.
    await b.pollLoadReports();
    await b.ready();
  });

  it('refuses bad options and rejects with Closed when the balancer closes', async () => {
    const b = balancer(custom(scripted()));
    expect((await rejection(b.ready({ timeoutMs: 0 }))).message).toMatch(/^ready\(options\)\.timeoutMs: /);
    expect((await rejection(b.ready({ wait: 1 } as never))).message).toMatch(/ready\(options\)\.wait/);
    b.update(backends(['a']));
    const ready = watch(b.ready());
    b.close();
    await until(() => ready.state !== 'pending', 'ready to settle');
    expect((ready.error as { code: string }).code).toBe('Closed');
  });
});

/** A postgres roles check whose every query waits until the test answers it with a role. */
function rolesClient(): { check: HealthCheckOptions; asked(): number; answer(role: 'primary' | 'replica'): void } {
  const waiting: ((r: unknown) => void)[] = [];
  return {
    check: {
      kind: 'postgres',
      roles: true,
      intervalMs: 600_000,
      jitterPercent: 0,
      rise: 1,
      fall: 1,
      timeoutMs: 600_000,
      client: { query: () => new Promise((resolve) => waiting.push(resolve)) },
    },
    asked: () => waiting.length,
    answer(role) {
      const r = waiting.shift()!;
      r({ rows: [{ in_recovery: role === 'replica', lsn: '0/1000', lag_ms: 0 }] });
    },
  };
}

describe('acquireAsync({ intent }) waits for the first role verdicts', () => {
  it('the first write right after update() gets the primary when its check lands (acquire() at the same moment is refused)', async () => {
    const c = rolesClient();
    const b = balancer(c.check);
    b.update(backends(['db']));
    const r = b.router();
    expect(thrown(() => r.acquire({ intent: 'write' })).code).toBe('NoEligibleCandidates');
    const write = watch(r.acquireAsync({ intent: 'write' }));
    const read = watch(r.acquireAsync({ intent: 'read' }));
    await until(() => c.asked() === 1, 'the first roles check');
    await turns();
    expect(write.state).toBe('pending');
    expect(read.state).toBe('pending');
    c.answer('primary');
    await until(() => write.state !== 'pending' && read.state !== 'pending', 'both to settle');
    expect((write.value as { id: string }).id).toBe('db');
    // No replica: the read falls back to the primary (readFallback default).
    expect((read.value as { id: string }).id).toBe('db');
  });

  it('once every member has its verdict, a refusal is the answer: no wait', async () => {
    const c = rolesClient();
    const b = balancer(c.check);
    b.update(backends(['db']));
    await until(() => c.asked() === 1, 'the first roles check');
    c.answer('replica');
    await b.ready();
    const r = b.router();
    // A wait would last the request's 60 s default; the test's own timeout is 5 s.
    const err = await rejection(r.acquireAsync({ intent: 'write' }));
    expect(err.code).toBe('NoEligibleCandidates');
    expect(err.message).toBe("acquire({ intent: 'write' }): no backend is a known primary");
  });

  it('at the request’s timeoutMs with the first check still out: the refusal, saying what it waited for', async () => {
    const c = rolesClient();
    const b = balancer(c.check);
    b.update(backends(['db']));
    const r = b.router();
    const err = await rejection(r.acquireAsync({ intent: 'write', timeoutMs: 20 }));
    expect(err.code).toBe('NoEligibleCandidates');
    expect(err.message).toBe(
      "acquire({ intent: 'write' }): no backend is a known primary (a member's first role check was still pending after 20 ms)",
    );
    // Without an intent nothing waits: the backend is routable before its check.
    const l = await r.acquireAsync();
    expect(l.id).toBe('db');
    l.release('success');
  });
});

describe('ready() across a health block that changes with the membership', () => {
  it('a backend added by the snapshot that also drops the check awaits nothing: ready() resolves', async () => {
    const s = scripted();
    const b = balancer(custom(s));
    b.update(backends(['a', 'b']));
    await until(() => s.asked('a') && s.asked('b'), 'the two first checks');
    s.answer('a', true);
    s.answer('b', true);
    await b.ready({ timeoutMs: 60_000 });
    // One snapshot: a new member and a health block without a check. The new member's
    // pending bits are those of the sources in force after it (none), not before it.
    b.apply({ version: 10, backends: backends(['a', 'b', 'd']), health: {} });
    await b.ready({ timeoutMs: 60_000 });
    expect(s.asked('d')).toBe(false);
  });
});
