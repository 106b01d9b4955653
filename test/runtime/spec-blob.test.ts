import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { resolveBackendSpecs } from '../../src/core/spec.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { blobLines, decodeBlob, encodeBlob, lineHead, specFromJson, type LineHead } from '../../src/runtime/spec-blob.js';
import { createLogger } from '../../src/log.js';

const logger = createLogger({ level: 'silent' });

describe('spec blob', () => {
  it('round-trips any ids and localities (newlines, commas, quotes, non-ASCII) with slots and generations', () => {
    fc.assert(
      fc.property(
        fc.uniqueArray(fc.string({ minLength: 1, maxLength: 20, unit: 'grapheme' }), { minLength: 0, maxLength: 12 }),
        fc.nat({ max: 1_000_000 }),
        (ids, version) => {
          const specs = resolveBackendSpecs(ids.map((id, i) => ({ id, address: `127.0.0.1:${7000 + i}`, locality: `z,\n"${id}` })));
          const entries = specs.map((spec, i) => ({ slot: i * 37, generation: (i * 0x9e37) & 0x0fffffff, spec }));
          expect(decodeBlob(encodeBlob({ version, entries }))).toEqual({ version, entries });
        },
      ),
    );
  });

  it('the empty blob is version 0 with no entries; each line parses its slot and generation', () => {
    expect(decodeBlob(new Uint8Array(0))).toEqual({ version: 0, entries: [] });
    const spec = resolveBackendSpecs([{ id: 'a,b\nc', address: '127.0.0.1:1' }])[0]!;
    const lines = blobLines(encodeBlob({ version: 9, entries: [{ slot: 1023, generation: 268_435_455, spec }] }));
    expect(lines.length).toBe(2);
    expect(lines[0]).toBe('9');
    const head: LineHead = { slot: -1, generation: -1, jsonStart: -1 };
    lineHead(lines[1]!, head);
    expect([head.slot, head.generation]).toEqual([1023, 268_435_455]);
    expect(specFromJson(lines[1]!.slice(head.jsonStart))).toEqual(spec);
    expect(Object.keys(specFromJson(lines[1]!.slice(head.jsonStart)))).toEqual(Object.keys(spec));
  });
});

describe('incremental membership (unchanged specs are neither re-encoded by the Balancer nor re-parsed by a Router)', () => {
  it('a router sees exactly each membership, change after change, whatever changed', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.array(fc.record({ n: fc.integer({ min: 0, max: 11 }), w: fc.integer({ min: 1, max: 3 }), d: fc.boolean() }), { maxLength: 8 }),
          {
            minLength: 1,
            maxLength: 8,
          },
        ),
        (changes) => {
          const b = new Balancer({ logger, capacity: 64 });
          const r = b.router({ policy: 'round-robin' });
          for (const change of changes) {
            const byId = new Map(change.map((c) => [`id,${c.n}\n`, c]));
            const docs = [...byId].map(([id, c]) => ({
              id,
              address: `127.0.0.1:${7000 + c.n}`,
              weight: c.w,
              status: c.d ? ('draining' as const) : ('ready' as const),
            }));
            const v = b.update(docs);
            expect(r.refresh()).toBe(v);
            const ready = docs.filter((d) => d.status === 'ready');
            if (ready.length === 0) {
              expect(() => r.acquire()).toThrow();
              continue;
            }
            const seen = new Map<string, number>();
            const weights = new Map<string, number>();
            // Round robin with weights is an EDF rotation: every member is due within one period (≤ 1 of virtual
            // time), and at most wᵢ + 1 deadlines of member i fall in any interval of length 1, so Σw + n picks see all.
            const picks = ready.reduce((sum, d) => sum + d.weight, 0) + ready.length;
            for (let k = 0; k < picks; k++) {
              const lease = r.acquire();
              seen.set(lease.id, lease.port);
              weights.set(lease.id, lease.spec.weight);
              lease.release('cancelled');
            }
            expect(new Map(ready.map((d) => [d.id, Number(d.address.split(':')[1])]))).toEqual(seen);
            // The router sees the latest weights (from the blob, the one truth of a spec).
            expect(new Map(ready.map((d) => [d.id, d.weight]))).toEqual(weights);
          }
        },
      ),
      { numRuns: 60 },
    );
  });
});
