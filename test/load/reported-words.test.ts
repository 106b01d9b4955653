// The agent's and ORCA's weights are two words with one writer each
// (load/backend-load.ts): a write of one never moves the other, and a new
// occupant's clear forgets both. Random sequences of writes against a model.
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_REPORTED_PPM, ReportFlag } from '../../src/load/backend-load.js';
import { LoadTable } from '../../src/load/load-table.js';

type Op = { who: 'agent' | 'orca' | 'admin' | 'clear'; ppm: number | undefined; bits: number };

describe('the reported words', () => {
  it('each writer moves only its own word; clear forgets both (fast-check, against a model)', () => {
    const op = fc.record({
      who: fc.constantFrom('agent' as const, 'orca' as const, 'admin' as const, 'clear' as const),
      ppm: fc.option(fc.integer({ min: 0, max: MAX_REPORTED_PPM }), { nil: undefined }),
      bits: fc.constantFrom(0, ReportFlag.Drain, ReportFlag.Maint),
    });
    fc.assert(
      fc.property(fc.array(op, { maxLength: 40 }), (ops: Op[]) => {
        const t = LoadTable.create({ capacity: 2 });
        const r = t.reported;
        let agent: number | undefined;
        let orca: number | undefined;
        let admin = 0;
        for (const o of ops) {
          if (o.who === 'agent') r.setAgentWeight(1, o.ppm);
          else if (o.who === 'orca') r.setOrcaWeight(1, o.ppm);
          else if (o.who === 'admin') r.setAdmin(1, o.bits);
          else r.clear(1);
          if (o.who === 'agent') agent = o.ppm;
          else if (o.who === 'orca') orca = o.ppm;
          else if (o.who === 'admin') admin = o.bits;
          else [agent, orca, admin] = [undefined, undefined, 0];
          expect(r.agentWeight(1)).toBe(agent === undefined ? undefined : agent / 1e6);
          expect(r.orcaWeight(1)).toBe(orca === undefined ? undefined : orca / 1e6);
          expect(r.flags(1) & (ReportFlag.Drain | ReportFlag.Maint)).toBe(admin);
          // The neighbour slot never moves.
          expect([r.agentWeight(0), r.orcaWeight(0), r.flags(0)]).toEqual([undefined, undefined, 0]);
        }
      }),
    );
  });

  it('a write says whether its word changed', () => {
    const r = LoadTable.create({ capacity: 1 }).reported;
    expect(r.setOrcaWeight(0, 500_000)).toBe(true);
    expect(r.setOrcaWeight(0, 500_000)).toBe(false);
    expect(r.setAgentWeight(0, 500_000)).toBe(true);
    expect(r.setAgentWeight(0, 500_000)).toBe(false);
    expect(r.setOrcaWeight(0, undefined)).toBe(true);
    expect(r.setOrcaWeight(0, undefined)).toBe(false);
    expect(r.agentWeight(0)).toBe(0.5);
  });
});
