// Lease accounting under faults: a late release never writes
// health into its slot's next occupant, and a router's open-lease limit
// refuses before anything is counted.
import { describe, expect, it } from 'vitest';
import { Balancer } from '../../src/runtime/balancer.js';
import { MAX_OPEN_LEASES } from '../../src/runtime/lease-book.js';
import { createLogger } from '../../src/log.js';
import { isPoiseError } from '../../src/core/errors.js';
import { SlotState } from '../../src/load/load-table.js';
import { thrown } from '../helpers/thrown.js';

const logger = createLogger({ level: 'silent' });

function at(id: string, port: number): { id: string; address: string } {
  return { id, address: `127.0.0.1:${port}` };
}

describe('a late release and slot reuse', () => {
  // The router's clock is called during release (to time-stamp the sample or
  // the ejection). This clock uses that moment to do what a busy owner may do
  // at any instant: apply the membership that reuses the released lease's
  // slot. If the release had already returned its load, the reuse succeeds
  // and the old backend's health lands on the new one.
  for (const outcome of ['success', 'failure'] as const) {
    it(`${outcome}: the owner's reuse attempt inside the release window is refused, and the new backend starts clean`, () => {
      const b = new Balancer({ logger, capacity: 1, clock: () => 1000 });
      b.update([at('old', 7000)]);
      let reuseTried = 0;
      let reuseResult: unknown;
      let inRelease = false;
      const clock = (): number => {
        if (inRelease && reuseTried === 0) {
          reuseTried++;
          try {
            reuseResult = b.update([at('new', 7001)]);
          } catch (err) {
            reuseResult = err;
          }
        }
        return 1000;
      };
      const r = b.router({ policy: 'round-robin', clock, ejection: { consecutiveFailures: 1 } });
      const lease = r.acquire();
      expect(lease.id).toBe('old');
      // 'old' is removed: a tombstone that keeps its slot while the lease is out.
      expect(b.update([])).toBe(2);
      inRelease = true;
      lease.release(outcome, { latencyMs: 5000 });
      inRelease = false;
      expect(reuseTried).toBe(1);
      // While the lease was still counted the slot could not be reused.
      expect(isPoiseError(reuseResult, 'CapacityExhausted')).toBe(true);
      // Now it can; the new occupant has a fresh estimate and no failures or ejection.
      expect(b.update([at('new', 7001)])).toBe(3);
      expect(b.table.stats(0)).toMatchObject({
        generation: 2,
        latencyEstimateUs: 50_000,
        connectEstimateUs: 50_000,
        failures: 0,
        ejections: 0,
        ejectedUntilMs: 0,
        connections: 0,
        requests: 0,
      });
      expect(r.acquire().id).toBe('new');
    });
  }
});

describe('the open-lease limit of one router', () => {
  it(`the ${MAX_OPEN_LEASES + 1}th open lease is refused with CapacityExhausted and nothing counted`, () => {
    const b = new Balancer({ logger, capacity: 2 });
    b.update([at('a', 7000), at('b', 7001)]);
    const r = b.router({ policy: 'round-robin' });
    const handles = new Int32Array(MAX_OPEN_LEASES);
    for (let k = 0; k < MAX_OPEN_LEASES; k++) handles[k] = r.acquireHandle();
    const total = (): number => b.table.requests(0) + b.table.requests(1);
    expect(total()).toBe(MAX_OPEN_LEASES);
    for (let attempt = 0; attempt < 3; attempt++) {
      let err: unknown;
      try {
        r.acquire();
      } catch (e) {
        err = e;
      }
      expect(err).toMatchObject({ code: 'CapacityExhausted', message: expect.stringContaining('1048576 open leases') });
      expect(total()).toBe(MAX_OPEN_LEASES);
    }
    let released = 0;
    for (let k = 0; k < MAX_OPEN_LEASES; k++) if (r.releaseHandle(handles[k]!, 'success')) released++;
    expect(released).toBe(MAX_OPEN_LEASES);
    expect(total()).toBe(0);
    expect(r.openLeases).toBe(0);
    // And the router works again.
    r.acquire().release('success');
    expect(total()).toBe(0);
  });
});

describe('membership moving during an acquire', () => {
  it('a view made stale between the epoch check and the draw is rebuilt, not turned into NoEligibleCandidates', () => {
    const b = new Balancer({ logger, capacity: 4, clock: () => 1000 });
    b.update([at('a', 7000), at('b', 7001)]);
    let hook: (() => void) | undefined;
    // p2c:latency reads the clock after its epoch check and before drawing:
    // the owner replaces the whole membership at exactly that instant.
    const clock = (): number => {
      const h = hook;
      hook = undefined;
      h?.();
      return 1000;
    };
    const r = b.router({ policy: 'p2c:latency', clock });
    r.acquire().release('cancelled');
    hook = () => {
      b.update([]);
      b.update([at('c', 7002), at('d', 7003)]);
    };
    const lease = r.acquire();
    expect(hook).toBeUndefined();
    expect(['c', 'd']).toContain(lease.id);
    lease.release('cancelled');
    for (let s = 0; s < 4; s++) expect(b.table.outstanding(s)).toBe(0);
  });

  it('a tag change that no epoch bump ever announces is waited for only briefly, then refused as before', () => {
    const b = new Balancer({ logger, capacity: 4 });
    b.update([at('a', 7000)]);
    const r = b.router({ policy: 'round-robin' });
    r.acquire().release('cancelled');
    // A slot retired behind the router's back with no publication (not what
    // the owner does; the bound on the wait is what is under test here).
    const t = b.ownerTable;
    const epoch = t.epochs.change();
    t.tags.setTag(0, t.tag(0) >>> 3, SlotState.Draining);
    for (let k = 0; k < 3; k++) expect(thrown(() => r.acquire()).code).toBe('NoEligibleCandidates');
    expect(t.epochs.change()).toBe(epoch);
    for (let s = 0; s < 4; s++) expect(b.table.outstanding(s)).toBe(0);
    // Once it is published, the router sees the drained membership as such.
    t.epochs.bumpHealth();
    expect(thrown(() => r.acquire()).code).toBe('NoEligibleCandidates');
    expect(r.openLeases).toBe(0);
  });
});

describe('acquire options and a closed router', () => {
  it('refuses a misspelled acquire option, naming it, and counts nothing', () => {
    const b = new Balancer({ logger });
    b.update([at('a', 7000)]);
    const r = b.router();
    expect(() => r.acquire({ exlcude: ['a'] } as never)).toThrow(
      expect.objectContaining({
        code: 'InvalidConfig',
        field: 'acquire(options).exlcude',
        message: 'acquire(options).exlcude: unknown option (accepted: key, priority, exclude, kind, intent, maxLagMs, minLsn)',
      }),
    );
    expect(b.table.outstanding(0)).toBe(0);
    expect(r.acquire({ key: 'k', exclude: [], kind: 'request' }).id).toBe('a');
  });

  it('a closed router refuses with Closed', () => {
    const b = new Balancer({ logger });
    b.update([at('a', 7000)]);
    const r = b.router();
    r.close();
    expect(() => r.acquire()).toThrow(expect.objectContaining({ code: 'Closed' }));
  });
});
