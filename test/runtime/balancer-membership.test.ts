/** Balancer.apply: what it applies, what it ignores and says so, and the codes it refuses with. */
import { describe, expect, it } from 'vitest';
import { Balancer } from '../../src/runtime/balancer.js';
import { captureLog } from '../helpers/log-capture.js';
import { thrown } from '../helpers/thrown.js';

const specs = (...ids: string[]) => ids.map((id, i) => ({ id, address: `127.0.0.1:${7000 + i}` }));
const L1 = '11111111111111111111111111111111';
const L2 = '22222222222222222222222222222222';

describe('Balancer.apply', () => {
  it('reports applied and ignored snapshots exactly; update() returns the version in force', () => {
    const b = new Balancer({ logger: captureLog().logger, capacity: 8 });
    expect(b.hasMembership).toBe(false);
    expect(b.apply({ version: 0, backends: specs('a') })).toEqual({ applied: true, version: 0, previous: 0 });
    expect(b.hasMembership).toBe(true);
    expect(b.apply({ version: 3, backends: specs('a', 'b') })).toEqual({ applied: true, version: 3, previous: 0 });
    expect(b.apply({ version: 2, backends: specs('z') })).toEqual({ applied: false, version: 3, offered: 2, reason: 'not-newer' });
    expect(b.apply({ version: 3, backends: specs('z') })).toEqual({ applied: false, version: 3, offered: 3, reason: 'not-newer' });
    expect(b.update({ version: 1, backends: specs('z') })).toBe(3);
    expect(b.apply(specs('a', 'b', 'c'))).toEqual({ applied: true, version: 4, previous: 3 });
    // Routers see the applied membership only: three round-robin picks cover exactly a, b, c.
    const r = b.router({ policy: 'round-robin' });
    expect(r.version).toBe(4);
    const picks = [r.acquire(), r.acquire(), r.acquire()].map((lease) => (lease.release('success'), lease.id));
    expect(picks.sort()).toEqual(['a', 'b', 'c']);
    r.close();
  });

  it('a snapshot of another lineage is applied whatever its version; then versions compare within it', () => {
    const b = new Balancer({ logger: captureLog().logger, capacity: 8 });
    b.apply({ version: 7, lineage: L1, backends: specs('a', 'b', 'c') });
    expect([b.version, b.lineage]).toEqual([7, L1]);
    expect(b.apply({ version: 1, lineage: L2, backends: specs('x') })).toEqual({ applied: true, version: 1, previous: 7 });
    expect([b.version, b.lineage]).toEqual([1, L2]);
    expect(b.apply({ version: 1, lineage: L2, backends: specs('y') })).toMatchObject({ applied: false, offered: 1 });
    // A snapshot without a lineage keeps the one in force and compares by version.
    expect(b.apply({ version: 1, backends: specs('y') })).toMatchObject({ applied: false });
    expect(b.apply({ version: 2, backends: specs('y') })).toMatchObject({ applied: true, version: 2 });
    expect(b.lineage).toBe(L2);
    // Held without a lineage (arrays, files): the first snapshot that brings one is applied.
    const c = new Balancer({ logger: captureLog().logger, capacity: 8 });
    c.update(specs('a'));
    c.update(specs('a', 'b'));
    expect(c.apply({ version: 1, lineage: L1, backends: specs('r') })).toEqual({ applied: true, version: 1, previous: 2 });
    expect(thrown(() => c.apply({ version: 2, lineage: '', backends: [] })).message).toBe(
      'membership.lineage: must be a string of 1 to 64 characters, got ""',
    );
  });

  it('refuses with codes: CapacityExhausted for too few slots, InvalidConfig for a sparse array, Closed after close()', () => {
    const b = new Balancer({ logger: captureLog().logger, capacity: 2 });
    b.update(specs('a', 'b'));
    const full = thrown(() => b.update(specs('a', 'b', 'c')));
    expect([full.code, full.field]).toEqual(['CapacityExhausted', 'backends']);
    expect(full.message).toMatch(/^backends: 1 new backends need free slots but only 0 are free \(options\.capacity 2;/);
    // eslint-disable-next-line no-sparse-arrays
    // biome-ignore lint/suspicious/noSparseArray: the hole is the input under test
    const sparse = thrown(() => b.update([{ id: 'a', address: '127.0.0.1:1' }, , { id: 'b', address: '127.0.0.1:2' }] as never));
    expect([sparse.code, sparse.message]).toEqual(['InvalidConfig', 'backends[1]: must be an object, got undefined']);
    const nul = thrown(() => b.update([{ id: 'a', address: '127.0.0.1:1', weight: null }] as never));
    expect([nul.code, nul.message]).toEqual(['InvalidWeight', 'backends[0].weight: must be an integer in [1, 4294967295], got null']);
    expect(b.version).toBe(1);
    b.close();
    const closed = thrown(() => b.update(specs('a')));
    expect([closed.code, closed.message]).toEqual(['Closed', 'balancer: is closed; membership refused']);
  });
});
