// The health supervisor (health/supervisor.ts) replaces its workers only when the
// configuration differs structurally: the same blocks resolved again keep every
// worker; one field, a different custom check or client, replaces them.
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { resolveHealthConfig } from '../../src/health/config.js';
import { sameHealthConfig, sameTargets } from '../../src/health/supervisor.js';
import type { HealthTarget } from '../../src/health/targets.js';
import { Balancer } from '../../src/runtime/balancer.js';

const conf = (v: unknown) => resolveHealthConfig(v, 'health', false);
const ok = async () => ({ up: true });
const other = async () => ({ up: true });
const client = { query: async () => ({ rows: [] }) };

describe('sameHealthConfig', () => {
  const table: [name: string, a: unknown, b: unknown, same: boolean][] = [
    ['both empty', {}, {}, true],
    ['one tcp check, resolved twice', { check: { kind: 'tcp' } }, { check: { kind: 'tcp' } }, true],
    ['defaults written out', { check: { kind: 'tcp' } }, { check: { kind: 'tcp', rise: 2, fall: 3 } }, true],
    ['another interval', { check: { kind: 'tcp' } }, { check: { kind: 'tcp', intervalMs: 7000 } }, false],
    [
      'an http status range alike',
      { check: { kind: 'http', expectedStatus: [200, 204] } },
      { check: { kind: 'http', expectedStatus: [200, 204] } },
      true,
    ],
    [
      'another http status range',
      { check: { kind: 'http', expectedStatus: [200, 204] } },
      { check: { kind: 'http', expectedStatus: [200, 299] } },
      false,
    ],
    ['the same custom check', { check: { kind: 'custom', check: ok } }, { check: { kind: 'custom', check: ok } }, true],
    [
      'another custom check (code: by identity)',
      { check: { kind: 'custom', check: ok } },
      { check: { kind: 'custom', check: other } },
      false,
    ],
    ['the same client', { check: { kind: 'postgres', client } }, { check: { kind: 'postgres', client } }, true],
    ['another client', { check: { kind: 'postgres', client } }, { check: { kind: 'postgres', client: { ...client } } }, false],
    ['an outlier block added', {}, { outlier: {} }, false],
    ['outlier alike', { outlier: { intervalMs: 500 } }, { outlier: { intervalMs: 500 } }, true],
    ['ORCA alike', { orca: { blackoutMs: 0 } }, { orca: { blackoutMs: 0 } }, true],
    ['ORCA differs', { orca: { blackoutMs: 0 } }, { orca: { blackoutMs: 1 } }, false],
    ['an agent added', { check: { kind: 'tcp' } }, { check: { kind: 'tcp' }, agent: {} }, false],
  ];
  for (const [name, a, b, same] of table) {
    it(`${name} → ${same ? 'same' : 'different'}`, () => {
      expect(sameHealthConfig(conf(a), conf(b))).toBe(same);
      expect(sameHealthConfig(conf(b), conf(a))).toBe(same);
    });
  }

  it('sameTargets: field by field, in order', () => {
    const t = (slot: number, address = `127.0.0.1:${7000 + slot}`): HealthTarget => ({
      slot,
      generation: 1,
      id: `b${slot}`,
      address,
      host: '127.0.0.1',
      port: 7000 + slot,
      priority: 0,
      role: 'none',
    });
    expect(sameTargets([t(0), t(1)], [t(0), t(1)])).toBe(true);
    expect(sameTargets([t(0), t(1)], [t(0)])).toBe(false);
    expect(sameTargets([t(0), t(1)], [t(0), t(1, '127.0.0.1:9')])).toBe(false);
    expect(sameTargets([t(0), t(1)], [t(1), t(0)])).toBe(false);
  });
});

describe('a Balancer re-applying health blocks', () => {
  it('a document with the same block keeps the workers; a changed block replaces them once', () => {
    const lines: string[] = [];
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        lines.push(
          ...chunk
            .toString()
            .split('\n')
            .filter((l) => l !== ''),
        );
        done();
      },
    });
    const applied = (): number =>
      lines.filter((l) => (JSON.parse(l) as { msg: string }).msg === 'poise: health configuration applied').length;
    let now = 1000;
    const b = new Balancer({ capacity: 4, clock: () => now, logger: pino({ level: 'info' }, sink) });
    try {
      // Construction applies the (empty) option once.
      expect(applied()).toBe(1);
      const backends = [{ id: 'a', address: '127.0.0.1:7000' }];
      b.apply({ version: 1, backends, health: { outlier: { intervalMs: 500 } } });
      expect(applied()).toBe(2);
      // The same block, a new object each time (a document re-read): nothing restarts.
      for (let v = 2; v < 6; v++) b.apply({ version: v, backends, health: { outlier: { intervalMs: 500 } } });
      expect(applied()).toBe(2);
      now += 10;
      b.apply({ version: 6, backends, health: { outlier: { intervalMs: 600 } } });
      expect(applied()).toBe(3);
      expect(b.sweepOutliers()).toEqual([]);
    } finally {
      b.close();
    }
  });
});
