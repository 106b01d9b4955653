/**
 * The LSN text `X/Y` (db/lsn.ts): the allocation-free parser an acquire's
 * `minLsn` goes through and the probe's parser accept exactly the same texts
 * and read the same halves; currentLsn passes the server's text through or
 * refuses it naming the field.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { currentLsn, parseLsnInto, parseLsnText } from '../../src/db/lsn.js';
import { rejection } from '../helpers/thrown.js';

/** Texts near the form: hex digits, slashes and a few others, 0–20 characters. */
const nearLsn = fc
  .array(fc.constantFrom('0', '1', '9', 'a', 'F', 'f', 'G', '/', ' ', '-', 'x'), { maxLength: 20 })
  .map((chars) => chars.join(''));

/** `parseLsnText`'s answer as a value: the halves, or undefined when it throws. */
function byText(s: string): [number, number] | undefined {
  try {
    return parseLsnText(s);
  } catch {
    return undefined;
  }
}

describe('the LSN text X/Y', () => {
  it('law: parseLsnInto and parseLsnText accept the same texts and read the same halves', () => {
    fc.assert(
      fc.property(fc.oneof(nearLsn, fc.string({ maxLength: 20 })), (s) => {
        const out = Uint32Array.of(7, 7);
        const ok = parseLsnInto(s, out);
        const want = byText(s);
        expect(ok).toBe(want !== undefined);
        // A refusal leaves out untouched.
        expect([...out]).toEqual(want ?? [7, 7]);
      }),
      { numRuns: 5000 },
    );
  });

  it('law: any pair of uint32 halves printed as PostgreSQL prints them reads back exactly', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffff_ffff }), fc.integer({ min: 0, max: 0xffff_ffff }), fc.boolean(), (hi, lo, upper) => {
        const text = `${hi.toString(16)}/${lo.toString(16)}`;
        const s = upper ? text.toUpperCase() : text;
        const out = new Uint32Array(2);
        expect(parseLsnInto(s, out)).toBe(true);
        expect([...out]).toEqual([hi, lo]);
        expect(parseLsnText(s)).toEqual([hi, lo]);
      }),
    );
  });

  it('currentLsn returns the server text, or refuses a non-LSN naming the field', async () => {
    const answering = (lsn: unknown) => ({ query: async () => ({ rows: [{ lsn }] }) });
    await expect(currentLsn(answering('16/B374D848'))).resolves.toBe('16/B374D848');
    for (const bad of ['16/B374D848 ', '123456789/0', '0/', 42, null]) {
      const err = await rejection(currentLsn(answering(bad)));
      expect(err.code).toBe('InvalidConfig');
      expect(err.field).toBe('lsn');
      expect(err.message).toBe(`currentLsn: the server returned ${JSON.stringify(bad)}, not an LSN "X/Y"`);
    }
    expect((await rejection(currentLsn({ query: async () => ({ rows: [] }) }))).field).toBe('lsn');
  });
});
