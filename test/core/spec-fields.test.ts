import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { MAX_PRIORITY } from '../../src/core/candidate.js';
import { resolveBackendSpec } from '../../src/core/spec.js';
import {
  MAX_INFLIGHT,
  SPEC_FIELDS,
  SPEC_FIELD_LIST,
  compactSpec,
  sameSpec,
  type BackendSpec,
  type ResolvedBackendSpec,
  type SpecFieldName,
} from '../../src/core/spec-fields.js';
import { MAX_WEIGHT } from '../../src/core/weight.js';
import { decodeBlob, encodeBlob } from '../../src/runtime/spec-blob.js';
import { thrown } from '../helpers/thrown.js';

// One entry per field of SPEC_FIELDS (the mapped types make a missing or an
// extra entry a compile error): the values its rule accepts, and values it
// refuses with the error code of that refusal.

/** Text that stresses every encoding: separators of the blob, JSON escapes, non-ASCII and astral characters, lone surrogates. */
const char = fc.oneof(
  fc.constantFrom('\n', ',', '"', '\\', '[', '\u2028', '\ud800', '\u{1f600}', 'é'),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 1 }),
);
/** A string of `min` to `max` UTF-16 code units. */
const textOf = (min: number, max: number): fc.Arbitrary<string> =>
  fc.oneof(
    fc.string({ unit: char, minLength: min, maxLength: max / 2 }),
    fc.constant('x'.repeat(max)),
    fc.constant('x'.repeat(Math.max(min, 1))),
  );
const port = fc.integer({ min: 1, max: 65535 });

const VALID: { [K in SpecFieldName]: fc.Arbitrary<ResolvedBackendSpec[K]> } = {
  id: textOf(1, 256),
  address: fc.oneof(
    fc.tuple(fc.ipV4(), port).map(([ip, p]) => `${ip}:${p}`),
    fc.tuple(fc.ipV6(), port).map(([ip, p]) => `[${ip}]:${p}`),
    fc.tuple(fc.constantFrom('db.local', 'my_host', '[fe80::1%eth0]', 'a-b.c-d'), port).map(([h, p]) => `${h}:${p}`),
  ),
  weight: fc.oneof(fc.integer({ min: 1, max: MAX_WEIGHT }), fc.constantFrom(1, 2, MAX_WEIGHT)),
  priority: fc.oneof(fc.integer({ min: 0, max: MAX_PRIORITY }), fc.constantFrom(0, 1, MAX_PRIORITY)),
  locality: textOf(0, 256),
  localityWeight: fc.oneof(fc.integer({ min: 1, max: MAX_WEIGHT }), fc.constantFrom(1, 2, MAX_WEIGHT)),
  status: fc.constantFrom('ready', 'degraded', 'draining', 'unavailable'),
  maxInflight: fc.oneof(fc.integer({ min: 0, max: MAX_INFLIGHT }), fc.constantFrom(0, 1, MAX_INFLIGHT)),
  panicEligible: fc.boolean(),
  role: fc.constantFrom('none', 'primary', 'replica'),
  hostname: fc.constantFrom('', 'api.internal', 'db-1.db.internal', 'x'),
  fallbackIp: fc.oneof(fc.constant(''), fc.ipV4(), fc.ipV6()),
};

const notAnInteger = fc.constantFrom(null, 1.5, Number.NaN, Number.POSITIVE_INFINITY, '1', true, [1], {});
const REFUSED: { [K in SpecFieldName]: { values: fc.Arbitrary<unknown>; code: 'InvalidConfig' | 'InvalidWeight' } } = {
  id: { values: fc.constantFrom('', 'x'.repeat(257), 7, null, true, ['a']), code: 'InvalidConfig' },
  address: { values: fc.constantFrom('localhost', '1.2.3.4:0', '999.1.1.1:80', '::1:80', 5, null), code: 'InvalidConfig' },
  weight: { values: fc.oneof(notAnInteger, fc.constantFrom(0, -1, MAX_WEIGHT + 1)), code: 'InvalidWeight' },
  priority: { values: fc.oneof(notAnInteger, fc.constantFrom(-1, MAX_PRIORITY + 1)), code: 'InvalidConfig' },
  locality: { values: fc.constantFrom('x'.repeat(257), 0, null, false), code: 'InvalidConfig' },
  localityWeight: { values: fc.oneof(notAnInteger, fc.constantFrom(0, MAX_WEIGHT + 1)), code: 'InvalidWeight' },
  status: { values: fc.constantFrom('up', 'READY', '', null, 1), code: 'InvalidConfig' },
  maxInflight: { values: fc.oneof(notAnInteger, fc.constantFrom(-1, MAX_INFLIGHT + 1)), code: 'InvalidConfig' },
  panicEligible: { values: fc.constantFrom('true', 0, 1, null), code: 'InvalidConfig' },
  role: { values: fc.constantFrom('Primary', 'master', '', null, 1, true), code: 'InvalidConfig' },
  hostname: { values: fc.constantFrom('127.0.0.1', '::1', 'a b', '-x.y', 'api.internal:80', null, 1), code: 'InvalidConfig' },
  fallbackIp: { values: fc.constantFrom('127.0.0.1:80', '[::1]', 'x', '999.1.1.1', null, 0), code: 'InvalidConfig' },
};

const NAMES = SPEC_FIELD_LIST.map((f) => f.name);
const REQUIRED = NAMES.filter((n) => !SPEC_FIELDS[n].optional);
const defaultOf = (name: SpecFieldName): unknown => SPEC_FIELDS[name].default;

/** A spec as written: the required fields, each optional one given or left out. */
const written: fc.Arbitrary<BackendSpec> = fc.record(VALID, { requiredKeys: REQUIRED });
/** Per field, a value its rule refuses. */
const refused = fc.record(Object.fromEntries(NAMES.map((n) => [n, REFUSED[n].values])) as { [K in SpecFieldName]: fc.Arbitrary<unknown> });

describe('the spec field table: every form derives from one declaration per field', () => {
  it('the tests cover exactly the declared fields, in declaration order', () => {
    expect(Object.keys(VALID)).toEqual(NAMES);
    expect(Object.keys(REFUSED)).toEqual(NAMES);
    expect(REQUIRED).toEqual(['id', 'address']);
  });

  it('round-trips every field: resolve -> blob -> decode, compact -> resolve; equality sees each field; each rule refuses (property)', () => {
    /** Per field, how many runs mutated it (a mutation needs another valid value). */
    const mutated = new Map<SpecFieldName, number>(NAMES.map((n) => [n, 0]));
    const runs = 1500;
    fc.assert(
      fc.property(
        written,
        fc.record(VALID),
        refused,
        fc.nat({ max: 1_000_000 }),
        fc.nat({ max: 0x0fff_ffff }),
        (spec, other, bad, slot, generation) => {
          // Resolve: every field given keeps its value, every field left out takes its default, in declaration order.
          const r = resolveBackendSpec(spec);
          expect(Object.keys(r)).toEqual(NAMES);
          for (const n of NAMES) expect(r[n]).toBe(spec[n] === undefined ? defaultOf(n) : spec[n]);

          // Blob: encode -> decode gives the same spec, field for field and in the same key order.
          const decoded = decodeBlob(encodeBlob({ version: 7, entries: [{ slot, generation, spec: r }] }));
          expect(decoded.entries).toHaveLength(1);
          const back = decoded.entries[0]!;
          expect([back.slot, back.generation]).toEqual([slot, generation]);
          expect(back.spec).toEqual(r);
          expect(Object.keys(back.spec)).toEqual(NAMES);

          // Compact: exactly the required fields and the non-default ones, in declaration order;
          // resolving it (as an object, and through its JSON text) gives the same spec.
          const c = compactSpec(r);
          expect(Object.keys(c)).toEqual(NAMES.filter((n) => !SPEC_FIELDS[n].optional || r[n] !== defaultOf(n)));
          expect(resolveBackendSpec(c)).toEqual(r);
          expect(resolveBackendSpec(JSON.parse(JSON.stringify(c)))).toEqual(r);

          // Equality: reflexive (the same object, a copy, the decoded spec).
          expect(sameSpec(r, r)).toBe(true);
          expect(sameSpec(r, { ...r })).toBe(true);
          expect(sameSpec(r, back.spec)).toBe(true);
          expect(sameSpec(back.spec, r)).toBe(true);

          for (const n of NAMES) {
            // A change of this one field: unequal both ways, and a different blob line and compact JSON.
            if (other[n] !== r[n]) {
              mutated.set(n, mutated.get(n)! + 1);
              const m = resolveBackendSpec({ ...r, [n]: other[n] });
              expect(sameSpec(r, m)).toBe(false);
              expect(sameSpec(m, r)).toBe(false);
              const blobOf = (s: ResolvedBackendSpec) => encodeBlob({ version: 7, entries: [{ slot, generation, spec: s }] }).join();
              expect(blobOf(m)).not.toBe(blobOf(r));
              expect(JSON.stringify(compactSpec(m))).not.toBe(JSON.stringify(c));
              expect(decodeBlob(encodeBlob({ version: 7, entries: [{ slot, generation, spec: m }] })).entries[0]!.spec).toEqual(m);
            }
            // A refused value of this one field: refused with its code, naming the field.
            const err = thrown(() => resolveBackendSpec({ ...spec, [n]: bad[n] }, 'backends[3]'));
            expect([err.code, err.field]).toEqual([REFUSED[n].code, `backends[3].${n}`]);
          }
          // A required field left out is refused, naming it.
          for (const n of REQUIRED) {
            const { [n]: _, ...rest } = spec;
            expect(thrown(() => resolveBackendSpec(rest)).field).toBe(`backend.${n}`);
          }
        },
      ),
      { numRuns: runs },
    );
    // Every field was changed in many runs (booleans in about half of them), so "detects a change of any field" was exercised.
    for (const n of NAMES) expect(mutated.get(n)!, n).toBeGreaterThan(runs / 4);
  });
});
