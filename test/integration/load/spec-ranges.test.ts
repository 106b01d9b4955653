/**
 * The spec blob's ranged publication: the owner stores only the words that
 * changed since its last publication (at most two ranges, named in the
 * header), and a reader holding that publication patches its copy with
 * them; any other reader copies every word. Laws: every copy a reader
 * returns is exactly the blob last published before it (single thread, any
 * interleaving), and with reader threads copying while the owner publishes,
 * no copy is ever a mix of two publications.
 */
import { Worker } from 'node:worker_threads';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { LoadTable } from '../../../src/load/load-table.js';
import { changedRanges } from '../../../src/load/spec-region.js';
import { blobText } from '../../fixtures/spec-blob-text.mjs';
import { until } from '../../helpers/until.js';

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** `prev` with `next`'s words copied in over the ranges: what a patching reader builds. */
function patched(prev: Int32Array, next: Int32Array): Int32Array {
  const out = new Int32Array(next.length);
  out.set(prev.length <= next.length ? prev : prev.subarray(0, next.length));
  const [a0, a1, b0, b1] = changedRanges(prev, next);
  for (let w = a0; w < a1; w++) out[w] = next[w]!;
  for (let w = b0; w < b1; w++) out[w] = next[w]!;
  return out;
}

/** Word arrays that are mostly one shared base with a few edits, lengths changed by some: what consecutive blobs look like. */
const edited = fc
  .record({
    base: fc.array(fc.integer({ min: 0, max: 3 }), { maxLength: 120 }),
    edits: fc.array(fc.record({ at: fc.nat(), value: fc.integer({ min: 0, max: 3 }), insert: fc.boolean() }), { maxLength: 6 }),
  })
  .map(({ base, edits }) => {
    const next = base.slice();
    for (const e of edits) {
      const at = next.length === 0 ? 0 : e.at % (next.length + 1);
      if (e.insert) next.splice(at, 0, e.value);
      else if (at < next.length) next[at] = e.value;
      else next.push(e.value);
    }
    return [Int32Array.from(base), Int32Array.from(next)] as const;
  });

describe('changedRanges', () => {
  it('patching the previous words over the two ranges gives the new words exactly; ranges are ordered and inside the new blob', () => {
    fc.assert(
      fc.property(edited, ([prev, next]) => {
        const [a0, a1, b0, b1] = changedRanges(prev, next);
        expect(patched(prev, next)).toEqual(next);
        expect(0 <= a0 && a0 <= a1 && a1 <= next.length).toBe(true);
        if (b1 > b0) expect(a1 <= b0 && b1 <= next.length).toBe(true);
      }),
      { numRuns: 3000 },
    );
  });

  it('names nothing when nothing changed, and only the changed words of a same-length change far apart', () => {
    const prev = Int32Array.from({ length: 200 }, (_, k) => k);
    expect(changedRanges(prev, prev.slice())).toEqual([0, 0, 0, 0]);
    const next = prev.slice();
    next[1] = -1;
    next[150] = -1;
    next[152] = -1;
    expect(changedRanges(prev, next)).toEqual([1, 2, 150, 153]);
    expect(changedRanges(new Int32Array(0), next)).toEqual([0, 200, 0, 0]);
  });
});

describe('LoadTable spec blob: ranged publication', () => {
  it('every copy equals the blob last published, for readers that read after each publication, skip some, or read twice', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            // Splices of the current text (position, characters removed, text inserted): heads, middles and tails change.
            // An in-place edit (same length, ASCII) keeps what follows where it was, so two of them far apart make two ranges.
            edits: fc.array(
              fc.record({
                at: fc.nat(),
                cut: fc.nat({ max: 12 }),
                text: fc.string({ maxLength: 40, unit: 'grapheme' }),
                inPlace: fc.boolean(),
              }),
              { minLength: 1, maxLength: 3 },
            ),
            readers: fc.array(fc.boolean(), { minLength: 3, maxLength: 3 }),
          }),
          { minLength: 1, maxLength: 25 },
        ),
        (steps) => {
          const owner = LoadTable.create({ capacity: 1, specBytes: 8192 });
          const readers = [LoadTable.attach(owner.buffer), LoadTable.attach(owner.buffer), LoadTable.attach(owner.buffer)];
          let current = '';
          for (const step of steps) {
            // The next blob is the current one with a few splices, so most words are shared and ranges are small.
            let next = current;
            for (const e of step.edits) {
              const at = e.at % (next.length + 1);
              const text = e.inPlace
                ? e.text
                    .replace(/[^a-z]/g, 'q')
                    .padEnd(e.cut, 'z')
                    .slice(0, e.cut)
                : e.text;
              next = next.slice(0, at) + text + next.slice(at + e.cut);
            }
            // (Compared as the decoded bytes: a cut may split a surrogate pair, which encodes as U+FFFD.)
            const bytes = encoder.encode(next);
            current = decoder.decode(bytes);
            owner.specs.publish(bytes);
            step.readers.forEach((reads, k) => {
              if (reads) expect(decoder.decode(readers[k]!.specs.read())).toBe(current);
            });
            expect(decoder.decode(readers[0]!.specs.read())).toBe(current);
            expect(decoder.decode(readers[0]!.specs.read())).toBe(current);
          }
          for (const r of readers) expect(decoder.decode(r.specs.read())).toBe(current);
        },
      ),
      { numRuns: 400 },
    );
  });

  it('two reader threads copying while the owner publishes 3,000 versions: no copy mixes two publications', async () => {
    const owner = LoadTable.create({ capacity: 1, specBytes: 64 * 1024 });
    // [0] stop, [1] the readers' spin word, [2] and [3] reader 1's and 2's last version read + 1 (0: not started).
    const stop = new SharedArrayBuffer(16);
    const cells = new Int32Array(stop);
    const workers = [1, 2].map(
      (seed) =>
        new Worker(new URL('../../fixtures/spec-blob-reader.mjs', import.meta.url), { workerData: { buffer: owner.buffer, stop, seed } }),
    );
    const reports = workers.map(
      (w) =>
        new Promise<{ reads: number; bad: number; firstBad: unknown; consecutive: number; same: number; jumps: number; last: number }>(
          (resolve, reject) => {
            w.once('message', resolve);
            w.once('error', reject);
          },
        ),
    );
    await until(() => Atomics.load(cells, 2) > 0 && Atomics.load(cells, 3) > 0, 'both readers copying');
    const VERSIONS = 3000;
    for (let v = 1; v <= VERSIONS; v++) {
      owner.specs.publish(encoder.encode(blobText(v)));
      // Let the readers run between some publications, so they see both consecutive and skipped versions.
      if (v % 100 === 0) await new Promise((resolve) => setImmediate(resolve));
    }
    await until(
      () => Atomics.load(cells, 2) === VERSIONS + 1 && Atomics.load(cells, 3) === VERSIONS + 1,
      'both readers on the last version',
    );
    Atomics.store(cells, 0, 1);
    const seen = await Promise.all(reports);
    await Promise.all(workers.map((w) => w.terminate()));
    for (const s of seen) {
      expect(s.firstBad).toBeUndefined();
      expect(s.bad).toBe(0);
      // Every reader ends on the last version, and read many copies on the way.
      expect(s.last).toBe(VERSIONS);
      expect(s.reads).toBeGreaterThan(100);
    }
    console.log(
      `spec-blob torture: ${seen.map((s) => `${s.reads} reads (${s.consecutive} one behind, ${s.jumps} skipped, ${s.same} unchanged)`).join('; ')}`,
    );
  }, 60_000);
});
