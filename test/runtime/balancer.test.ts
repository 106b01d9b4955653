import { describe, expect, it } from 'vitest';
import { Balancer } from '../../src/runtime/balancer.js';
import type { PoiseError } from '../../src/core/errors.js';
import { SlotState } from '../../src/load/load-table.js';
import { createLogger } from '../../src/log.js';
import { specs } from '../helpers/runtime.js';

const logger = createLogger({ level: 'silent' });

describe('Balancer.update', () => {
  it('versions arrays, ignores older snapshots, and keeps the last good membership on bad input', () => {
    const b = new Balancer({ logger, capacity: 8 });
    expect(b.version).toBe(0);
    expect(b.update(specs(2))).toBe(1);
    expect(b.update({ version: 10, backends: specs(3) })).toBe(10);
    expect(b.update({ version: 10, backends: specs(1) })).toBe(10);
    expect(b.update({ version: 4, backends: specs(1) })).toBe(10);
    expect(() => b.update([{ id: 'x', address: 'nope' }])).toThrow(
      'backends[0].address: must be "host:port" with a port in [1, 65535] (IPv6 as "[::1]:port"), got "nope"',
    );
    expect(() => b.update([{ id: 'x', address: '127.0.0.1:1', weight: -1 }])).toThrow(
      'backends[0].weight: must be an integer in [1, 4294967295], got -1',
    );
    expect(() => b.update({ version: -1, backends: [] })).toThrow('membership.version: must be an integer >= 0, got -1');
    expect(b.version).toBe(10);
    const r = b.router({ policy: 'random' });
    expect(r.version).toBe(10);
    const seen = new Set<string>();
    for (let i = 0; i < 200; i++) {
      const l = r.acquire();
      seen.add(l.id);
      l.release('cancelled');
    }
    expect([...seen].sort()).toEqual(['b0', 'b1', 'b2']);
  });

  it('applies a first snapshot with version 0, then ignores a later version 0', () => {
    const b = new Balancer({ logger, capacity: 8 });
    expect(b.update({ version: 0, backends: specs(2) })).toBe(0);
    const r = b.router({ policy: 'round-robin' });
    const seen = new Set<string>();
    for (let i = 0; i < 4; i++) {
      const l = r.acquire();
      seen.add(l.id);
      l.release('cancelled');
    }
    expect([...seen].sort()).toEqual(['b0', 'b1']);
    // Nothing newer than 0 arrives: a second version-0 snapshot is ignored.
    expect(b.update({ version: 0, backends: specs(1) })).toBe(0);
    expect(b.table.stats(1).state).toBe(SlotState.Ready);
    // An array after it gets version 1.
    expect(b.update(specs(3))).toBe(1);
    // version is a pure read of the view in force; refresh() (or the next acquire) moves it.
    expect(r.version).toBe(0);
    expect(r.version).toBe(0);
    expect(r.refresh()).toBe(1);
    expect(r.version).toBe(1);
    r.acquire().release('cancelled');
    b.update(specs(2));
    expect(r.version).toBe(1);
    r.acquire().release('cancelled');
    expect(r.version).toBe(2);
  });

  it('rejects a membership that needs more slots than are free, naming the capacity', () => {
    const b = new Balancer({ logger, capacity: 2 });
    b.update(specs(2));
    expect(() => b.update(specs(3))).toThrow(/backends: 1 new backends need free slots but only 0 are free \(options\.capacity 2/);
    expect(() => b.update(specs(3))).toThrow(expect.objectContaining({ code: 'CapacityExhausted', field: 'backends' }));
    expect(b.version).toBe(1);
  });

  it('names a bad constructor option', () => {
    expect(() => new Balancer({ capacity: 0 })).toThrow('options.capacity: must be an integer in [1, 65536], got 0');
    try {
      new Balancer({ maxThreads: 300 });
    } catch (e) {
      expect((e as PoiseError).code).toBe('InvalidConfig');
      expect((e as PoiseError).field).toBe('options.maxThreads');
    }
  });
});
