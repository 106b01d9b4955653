/**
 * Sample values read as Prometheus reads them (Go's ParseFloat without
 * p, P and _), and whole expositions that round-trip: parse(format(x))
 * gives back x for random families, labels, help texts and values spelled
 * every way the format allows — up to 100,000 digits long. Inputs of that
 * size finish only because every scan is linear (a backtracking float
 * pattern needs minutes for one of them); the timings are in
 * `npm run bench:metrics-parse`, not here.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { parseMetricsText, type MetricFamily } from '../../src/metrics/text-format.js';
import { parseTextFloat } from '../../src/metrics/text-float.js';

const BIG = 100_000;

/** The exact decimal expansion of a finite double (every double has one): integer part, fraction digits. */
function exactDecimal(d: number): { neg: boolean; int: string; frac: string } {
  const view = new DataView(new ArrayBuffer(8));
  view.setFloat64(0, d);
  const hi = view.getUint32(0);
  const lo = view.getUint32(4);
  const neg = hi >>> 31 === 1;
  const biased = (hi >>> 20) & 0x7ff;
  let mant = (BigInt(hi & 0xfffff) << 32n) | BigInt(lo);
  let exp = biased - 1075;
  if (biased === 0) exp = -1074;
  else mant |= 1n << 52n;
  if (exp >= 0) return { neg, int: (mant << BigInt(exp)).toString(), frac: '' };
  // m × 2^exp = m × 5^-exp / 10^-exp: exactly -exp fraction digits.
  const digits = (mant * 5n ** BigInt(-exp)).toString().padStart(-exp + 1, '0');
  return { neg, int: digits.slice(0, exp), frac: digits.slice(exp) };
}

/** How a finite value is spelled: extra zeros, the point moved into the exponent, digits past the last bit. */
interface Spelling {
  plus: boolean;
  leadingZeros: number;
  trailingZeros: number;
  /** Random digits after the exact expansion: below half an ULP, so the value does not change. */
  tail: string;
  exponentForm: boolean;
  upperE: boolean;
  expPlus: boolean;
}

function spell(d: number, s: Spelling): string {
  const { neg, int, frac } = exactDecimal(d);
  const sign = neg ? '-' : s.plus ? '+' : '';
  // A tail after an integer double goes behind ".0": it adds less than 0.1, under half of any ULP >= 1.
  const fraction = frac + (frac === '' && s.tail !== '' ? '0' : '') + s.tail + '0'.repeat(s.trailingZeros);
  const zeros = '0'.repeat(s.leadingZeros);
  if (!s.exponentForm) return `${sign}${zeros}${int}${fraction === '' ? '' : `.${fraction}`}`;
  // All digits as one integer mantissa, the point moved into the exponent: same value.
  const e = s.upperE ? 'E' : 'e';
  const k = fraction.length;
  return `${sign}${zeros}${int}${fraction}${e}${k === 0 ? (s.expPlus ? '+0' : '0') : `-${k}`}`;
}

const length = fc.oneof({ weight: 8, arbitrary: fc.integer({ min: 0, max: 12 }) }, { weight: 1, arbitrary: fc.constant(BIG) });
const spelling: fc.Arbitrary<Spelling> = fc.record({
  plus: fc.boolean(),
  leadingZeros: length,
  trailingZeros: length,
  tail: fc.oneof(
    { weight: 6, arbitrary: fc.constant('') },
    { weight: 2, arbitrary: fc.stringMatching(/^[0-9]{1,30}$/) },
    { weight: 1, arbitrary: fc.constant(BIG).map((n) => '7'.repeat(n)) },
  ),
  exponentForm: fc.boolean(),
  upperE: fc.boolean(),
  expPlus: fc.boolean(),
});

const specialSpelling = (d: number): fc.Arbitrary<string> =>
  Number.isNaN(d)
    ? fc.constantFrom('NaN', 'nan', 'NAN', 'nAn')
    : fc.constantFrom(...(d > 0 ? ['Inf', '+Inf', 'inf', '+infinity', 'Infinity', 'INF'] : ['-Inf', '-inf', '-Infinity', '-INFINITY']));

/** A value and one way to write it. */
const value: fc.Arbitrary<{ v: number; text: string }> = fc
  .oneof(
    { weight: 6, arbitrary: fc.double() },
    { weight: 1, arbitrary: fc.constantFrom(1e-300, -1e-300, 5e-324, Number.MAX_VALUE, -Number.MAX_VALUE, 0, -0, 0.1, 1) },
  )
  .chain((v) => (Number.isFinite(v) ? spelling.map((s) => ({ v, text: spell(v, s) })) : specialSpelling(v).map((text) => ({ v, text }))));

describe('sample values (Go ParseFloat without p, P, _ — what Prometheus accepts)', () => {
  it.each([
    ['1', 1],
    ['-1.5e3', -1500],
    ['+.5', 0.5],
    ['1.', 1],
    ['.5E-3', 0.0005],
    ['007', 7],
    ['1e+2', 100],
    ['-0', -0],
    ['1e-300', 1e-300],
    ['4.9e-324', 5e-324],
    ['1e-400', 0],
    ['1.7976931348623157e308', Number.MAX_VALUE],
    ['Inf', Infinity],
    ['+Inf', Infinity],
    ['-Inf', -Infinity],
    ['inf', Infinity],
    ['-infinity', -Infinity],
    ['INFINITY', Infinity],
    ['NaN', Number.NaN],
    ['nan', Number.NaN],
  ])('reads %s', (text, expected) => {
    expect(Object.is(parseTextFloat(text), expected)).toBe(true);
  });

  it.each([
    '',
    '+',
    '-',
    '.',
    '+.',
    'e5',
    '.e5',
    '1e',
    '1e+',
    '1e5.5',
    '1..2',
    '--1',
    '+-1',
    ' 1',
    '1 ',
    '+NaN',
    '-nan',
    'NaN1',
    'infin',
    'Infinit',
    'Infinity1',
    '0x10',
    '0x1p3',
    '1p3',
    '1_000',
    '١',
    '1e١',
  ])('refuses %j as syntax', (text) => {
    expect(parseTextFloat(text)).toBe('syntax');
  });

  it.each([
    ['1e309', '1e309'],
    ['-1e400', '-1e400'],
    ['1.8e308', '1.8e308'],
    ['2^1024', (2n ** 1024n).toString()],
    ['MAX + half an ULP (a tie rounds to even: 2^1024)', (2n ** 1024n - 2n ** 970n).toString()],
  ])('refuses %s as out of the float64 range (Go ErrRange)', (_what, text) => {
    expect(parseTextFloat(text)).toBe('range');
  });

  it('just under MAX + half an ULP rounds to MAX', () => {
    expect(parseTextFloat((2n ** 1024n - 2n ** 970n - 1n).toString())).toBe(Number.MAX_VALUE);
  });

  it('every finite double, spelled any way the format allows (extra zeros, exponent form, 100,000 digits), reads back exactly', () => {
    fc.assert(
      fc.property(value, ({ v, text }) => {
        expect(Object.is(parseTextFloat(text), v)).toBe(true);
      }),
      { numRuns: 600 },
    );
  });

  it('100,000-digit inputs: a long run then a bad character is refused; a 100,000-digit mantissa past the range is refused', () => {
    const digits = '1'.repeat(BIG);
    for (const bad of [`${digits}x`, `${digits}.${digits}e`, `${digits}e+`, `+${digits}.${digits}_1`, `.${digits}e${digits}x`])
      expect(parseTextFloat(bad)).toBe('syntax');
    expect(parseTextFloat(digits)).toBe('range');
    expect(parseTextFloat(`${digits}e-${BIG - 1}`)).toBe(1.1111111111111112);
    expect(parseTextFloat(`0.${'0'.repeat(BIG)}1e${BIG}`)).toBe(0.1);
  });
});

// ---- whole expositions -------------------------------------------------

interface Fam {
  name: string;
  help: string | undefined;
  type: 'counter' | 'gauge' | 'untyped';
  samples: { labels: [string, string][]; v: number; text: string }[];
}

const metricName = fc.stringMatching(/^[a-zA-Z_:][a-zA-Z0-9_:]{0,20}$/);
const labelName = fc.stringMatching(/^[a-zA-Z][a-zA-Z0-9_]{0,10}$/);
const labelValue = fc.oneof(
  { weight: 8, arbitrary: fc.string({ maxLength: 20, unit: 'binary' }) },
  { weight: 1, arbitrary: fc.constantFrom('\\', '"', '\n', '\\n', '\r', '\u2028', '{a="b"}', ' 1 2') },
  { weight: 1, arbitrary: fc.constant(BIG).map((n) => 'v\\"\n'.repeat(n / 4)) },
);
const labelSet = fc.uniqueArray(fc.tuple(labelName, labelValue), { maxLength: 4, selector: ([k]) => k });

const family: fc.Arbitrary<Omit<Fam, 'name'>> = fc
  .record({
    help: fc.option(fc.oneof(fc.string({ maxLength: 30, unit: 'binary' }), fc.constantFrom('a\rb', 'x\u2028y', '\\n', 'tab\there')), {
      nil: undefined,
    }),
    type: fc.constantFrom('counter', 'gauge', 'untyped') as fc.Arbitrary<Fam['type']>,
    sets: fc.uniqueArray(labelSet, { minLength: 1, maxLength: 4, selector: (s) => JSON.stringify([...s].sort()) }),
  })
  .chain(({ help, type, sets }) =>
    fc.tuple(...sets.map(() => value)).map((vals) => ({
      help,
      type,
      samples: sets.map((labels, k) => {
        const val = vals[k]!;
        // A counter is never negative or NaN: write its magnitude, or 0.
        if (type === 'counter' && !(val.v >= 0)) return { labels, v: 0, text: '0' };
        return { labels, v: val.v, text: val.text };
      }),
    })),
  );

const exposition = fc
  .uniqueArray(metricName, { minLength: 1, maxLength: 6 })
  .chain((names) => fc.tuple(...names.map(() => family)).map((fs) => fs.map((f, k) => ({ ...f, name: names[k]! }) as Fam)));

const escLabel = (v: string): string => v.replaceAll('\\', '\\\\').replaceAll('"', '\\"').replaceAll('\n', '\\n');
const escHelp = (h: string): string => h.replaceAll('\\', '\\\\').replaceAll('\n', '\\n');

/** The text format of `fams`: HELP, TYPE, then the samples of each family, contiguous. */
function format(fams: readonly Fam[]): string {
  let out = '';
  for (const f of fams) {
    if (f.help !== undefined) out += `# HELP ${f.name} ${escHelp(f.help)}\n`;
    out += `# TYPE ${f.name} ${f.type}\n`;
    for (const s of f.samples) {
      const labels = s.labels.length === 0 ? '' : `{${s.labels.map(([k, v]) => `${k}="${escLabel(v)}"`).join(',')}}`;
      out += `${f.name}${labels} ${s.text}\n`;
    }
  }
  return out;
}

describe('parseMetricsText(format(x)) is x', () => {
  it('random families: names, HELP, TYPE, label escapes, values in every spelling (some 100,000 characters long)', () => {
    fc.assert(
      fc.property(exposition, (fams) => {
        const parsed = parseMetricsText(format(fams));
        expect([...parsed.keys()]).toEqual(fams.map((f) => f.name));
        for (const f of fams) {
          const p = parsed.get(f.name) as MetricFamily;
          // A HELP with no text is written as "# HELP name " and reads back empty.
          expect([p.help, p.type]).toEqual([f.help, f.type]);
          expect(p.samples.map((s) => [s.name, s.labels])).toEqual(f.samples.map((s) => [f.name, Object.fromEntries(s.labels)]));
          for (const [k, s] of p.samples.entries()) expect(Object.is(s.value, f.samples[k]!.v)).toBe(true);
        }
      }),
      { numRuns: 150 },
    );
  });

  it('a 100,000-character name followed by a carriage return is refused at once, naming the line (a backtracking head pattern was quadratic here)', () => {
    const long = `x${'a'.repeat(BIG)}`;
    for (const sep of ['\r', '\u2028', '\t'])
      expect(() => parseMetricsText(`ok 1\n${long}${sep} 1\n`)).toThrow(/^metrics text line 2: expected one space/);
    expect(() => parseMetricsText(`x ${'1'.repeat(BIG)}x\n`)).toThrow(
      /^metrics text line 1: value "1{40}"… \(100001 characters\) is not a float$/,
    );
  });

  it('a deadline covers the parse: past it, Unavailable naming the line; a clock that never passes it changes nothing', () => {
    const text = Array.from({ length: 1000 }, (_, i) => `m${i} ${i}\n`).join('');
    let t = 0;
    // The clock moves one step per look: the 3rd look (line 513) is past the deadline 2.
    expect(() => parseMetricsText(text, { deadline: 2, now: () => ++t })).toThrow(
      'metrics text: the deadline passed while parsing (at line 513)',
    );
    expect(parseMetricsText(text, { deadline: 1, now: () => 0 }).size).toBe(1000);
  });
});
