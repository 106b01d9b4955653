import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { finiteNumber, integerIn, isIntegerIn, nonNegativeNumber, numberIn, positiveNumber } from '../../src/core/validate.js';
import { thrown } from '../helpers/thrown.js';

describe('integerIn', () => {
  it('accepts exactly the safe integers in [min, max] and returns them', () => {
    fc.assert(
      fc.property(fc.integer({ min: -1000, max: 1000 }), fc.integer({ min: -1000, max: 1000 }), fc.double(), (a, b, x) => {
        const [min, max] = a <= b ? [a, b] : [b, a];
        const ok = Number.isInteger(x) && x >= min && x <= max;
        expect(isIntegerIn(x, min, max)).toBe(ok);
        if (ok) expect(integerIn(x, 'f', min, max)).toBe(x);
        else expect(thrown(() => integerIn(x, 'f', min, max)).code).toBe('InvalidConfig');
        for (const v of [min, max]) expect(integerIn(v, 'f', min, max)).toBe(v);
        expect(isIntegerIn(min - 1, min, max)).toBe(false);
        expect(isIntegerIn(max + 1, min, max)).toBe(false);
      }),
    );
  });

  it('refuses non-numbers, fractions, NaN, infinities and unsafe integers', () => {
    for (const v of ['3', null, undefined, 3n, 1.5, Number.NaN, Number.POSITIVE_INFINITY, 2 ** 53, {}]) {
      expect(isIntegerIn(v, 0, Number.MAX_VALUE)).toBe(false);
    }
  });

  it.each([
    [() => integerIn(70000, 'options.port', 0, 65535), 'options.port', 'options.port: must be an integer in [0, 65535], got 70000'],
    [() => integerIn(0, 'options.capacity', 1), 'options.capacity', 'options.capacity: must be an integer >= 1, got 0'],
    [() => integerIn('7', 'x', 1), 'x', 'x: must be an integer >= 1, got "7"'],
    [
      () => integerIn(-1, 'b.maxInflight', 0, 10, '0 = unlimited'),
      'b.maxInflight',
      'b.maxInflight: must be an integer in [0, 10] (0 = unlimited), got -1',
    ],
  ])('names the field and the reason (%#)', (fn, field, message) => {
    const err = thrown(fn);
    expect(err.code).toBe('InvalidConfig');
    expect(err.field).toBe(field);
    expect(err.message).toBe(message);
  });
});

describe('number checks', () => {
  it('numberIn accepts [min, max] inclusive, refuses NaN and the outside', () => {
    expect(numberIn(0.5, 'f', 0.5, 2)).toBe(0.5);
    expect(numberIn(2, 'f', 0.5, 2)).toBe(2);
    expect(thrown(() => numberIn(2.0001, 'f', 0.5, 2, 'milliseconds')).message).toBe(
      'f: must be a number in [0.5, 2] (milliseconds), got 2.0001',
    );
    expect(thrown(() => numberIn(Number.NaN, 'f', 0, 1)).message).toBe('f: must be a number in [0, 1], got NaN');
  });

  it('positiveNumber, nonNegativeNumber and finiteNumber draw the line at 0 and at infinity', () => {
    expect(positiveNumber(Number.MIN_VALUE, 'p')).toBe(Number.MIN_VALUE);
    expect(thrown(() => positiveNumber(0, 'p', 'milliseconds')).message).toBe('p: must be a finite number > 0 (milliseconds), got 0');
    expect(thrown(() => positiveNumber(Number.POSITIVE_INFINITY, 'p')).message).toBe('p: must be a finite number > 0, got Infinity');
    expect(nonNegativeNumber(0, 'n')).toBe(0);
    expect(thrown(() => nonNegativeNumber(-0.1, 'n')).message).toBe('n: must be a finite number >= 0, got -0.1');
    expect(thrown(() => nonNegativeNumber(Number.NaN, 'n')).field).toBe('n');
    expect(finiteNumber(-5, 'q')).toBe(-5);
    expect(thrown(() => finiteNumber(Number.NEGATIVE_INFINITY, 'q')).message).toBe('q: must be a finite number, got -Infinity');
    expect(thrown(() => finiteNumber('1', 'q')).message).toBe('q: must be a finite number, got "1"');
  });
});
