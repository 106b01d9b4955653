import { describe, expect, it } from 'vitest';
import { Backend, Localized, Prioritized, isStatus } from '../../src/core/candidate.js';
import { thrown } from '../helpers/thrown.js';

describe('Backend', () => {
  it('defaults: weight 1, ready, load 0, eligible', () => {
    const b = new Backend('db-1');
    expect([b.id, b.weight, b.status, b.load(), b.isEligible()]).toEqual(['db-1', 1, 'ready', 0, true]);
  });

  it('only ready backends are eligible; status changes in place', () => {
    const b = new Backend('a', { status: 'draining' });
    expect(b.isEligible()).toBe(false);
    b.status = 'unavailable';
    expect(b.isEligible()).toBe(false);
    b.status = 'ready';
    expect(b.isEligible()).toBe(true);
  });

  it('reads load through the given function every time', () => {
    let active = 3;
    const b = new Backend('a', { load: () => active });
    expect(b.load()).toBe(3);
    active = 9;
    expect(b.load()).toBe(9);
  });

  it.each([
    [() => new Backend(''), 'InvalidConfig', 'id: must be a non-empty string, got ""'],
    [() => new Backend(5 as unknown as string), 'InvalidConfig', 'id: must be a non-empty string, got 5'],
    [() => new Backend('a', { weight: 0 }), 'InvalidWeight', 'weight: must be an integer in [1, 4294967295], got 0'],
    [() => new Backend('a', { weight: -2 }), 'InvalidWeight', 'weight: must be an integer in [1, 4294967295], got -2'],
    [
      () => new Backend('a', { status: 'up' as unknown as 'ready' }),
      'InvalidConfig',
      'status: must be one of ready, draining, unavailable, got "up"',
    ],
  ])('rejects bad input with an exact message (%#)', (make, code, message) => {
    const err = thrown(make);
    expect(err.code).toBe(code);
    expect(err.message).toBe(message);
  });

  it('isStatus accepts exactly the three statuses', () => {
    expect(['ready', 'draining', 'unavailable'].every(isStatus)).toBe(true);
    expect(['up', '', 1, null].some(isStatus)).toBe(false);
  });
});

describe('Prioritized and Localized', () => {
  it('delegate identity, weight, eligibility and load to the inner candidate', () => {
    const inner = new Backend('x', { weight: 4, load: () => 7 });
    const p = new Prioritized(inner, 2);
    const l = new Localized(p, 'us-west-2', 3);
    for (const c of [p, l]) expect([c.id, c.weight, c.isEligible(), c.load(), c.priority]).toEqual(['x', 4, true, 7, 2]);
    expect([l.locality, l.localityWeight]).toEqual(['us-west-2', 3]);
    inner.status = 'unavailable';
    expect(l.isEligible()).toBe(false);
  });

  it('a draining inner candidate is neither a member nor panic-eligible; unavailable stays a member', () => {
    const inner = new Backend('x', { status: 'draining' });
    const p = new Prioritized(inner, 0);
    expect([p.isMember(), p.isPanicEligible()]).toEqual([false, false]);
    inner.status = 'unavailable';
    expect([p.isMember(), p.isPanicEligible()]).toEqual([true, true]);
    expect(p.withPanicEligibility(false).isPanicEligible()).toBe(false);
    expect(p.withPanicEligibility(false).isMember()).toBe(true);
  });

  it('Localized over a plain candidate has priority 0', () => {
    const l = new Localized(new Backend('x'), 'eu');
    expect([l.priority, l.localityWeight, l.isMember(), l.isPanicEligible()]).toEqual([0, 1, true, true]);
    expect(l.withLocalityWeight(9).localityWeight).toBe(9);
  });

  it.each([
    [() => new Prioritized(new Backend('x'), -1), 'InvalidConfig', 'priority: must be an integer in [0, 4294967295], got -1'],
    [() => new Prioritized(new Backend('x'), 1.5), 'InvalidConfig', 'priority: must be an integer in [0, 4294967295], got 1.5'],
    [() => new Localized(new Backend('x'), 5 as unknown as string), 'InvalidConfig', 'locality: must be a string, got 5'],
    [
      () => new Localized(new Backend('x'), 'eu').withLocalityWeight(0),
      'InvalidWeight',
      'localityWeight: must be an integer in [1, 4294967295], got 0',
    ],
  ])('rejects bad metadata with an exact message (%#)', (make, code, message) => {
    const err = thrown(make);
    expect(err.code).toBe(code);
    expect(err.message).toBe(message);
  });
});

describe('Backend options', () => {
  it('Backend refuses a load that is not a function', () => {
    expect(() => new Backend('a', { load: 5 as never })).toThrow('load: must be a function returning a number, got 5');
  });
});
