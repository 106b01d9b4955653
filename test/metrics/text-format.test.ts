/** The strict text-format parser: what it accepts, and each rule it enforces, named in its refusal. */
import { describe, expect, it } from 'vitest';
import { parseMetricsText } from '../../src/metrics/text-format.js';

const GOOD = `# HELP x_total A counter with a \\\\ and a \\n in its help.
# TYPE x_total counter
x_total{a="q\\"uote",b="back\\\\slash",c="new\\nline"} 3
x_total{a="2"} 0 1700000000000
# TYPE g gauge
g -1.5e3
g{k="v"} NaN
# TYPE h histogram
h_bucket{le="0.1"} 1
h_bucket{le="1"} 3
h_bucket{le="+Inf"} 4
h_sum 2.5
h_count 4
`;

describe('parseMetricsText', () => {
  it('parses families, label escapes, special values and histograms', () => {
    const f = parseMetricsText(GOOD);
    expect([...f.keys()]).toEqual(['x_total', 'g', 'h']);
    expect(f.get('x_total')!.help).toBe('A counter with a \\ and a \n in its help.');
    expect(f.get('x_total')!.samples[0]!.labels).toEqual({ a: 'q"uote', b: 'back\\slash', c: 'new\nline' });
    expect(f.get('g')!.samples.map((s) => s.value)).toEqual([-1500, Number.NaN]);
    expect(f.get('h')!.samples.map((s) => s.name)).toEqual(['h_bucket', 'h_bucket', 'h_bucket', 'h_sum', 'h_count']);
  });

  it('reads the special values as Prometheus does (Go ParseFloat: any case, Inf or Infinity, signed infinities): prom-client writes NaN as "Nan"', () => {
    const words = ['NaN', 'Nan', 'nan', 'Inf', '+Inf', '-Inf', 'inf', '+infinity', '-Infinity'];
    const text = words.map((w, i) => `g${i} ${w}\n`).join('');
    const values = [...parseMetricsText(text).values()].map((f) => f.samples[0]!.value);
    expect(values).toEqual([Number.NaN, Number.NaN, Number.NaN, Infinity, Infinity, -Infinity, Infinity, Infinity, -Infinity]);
    for (const bad of ['NaNa', '+-Inf', 'In', 'infinit', '1e', '.'])
      expect(() => parseMetricsText(`g ${bad}\n`), bad).toThrow('is not a float');
  });

  it.each([
    ['a bad metric name', '1x 1\n', 'metric name "1x"'],
    ['a bad label name', 'x{1a="v"} 1\n', 'label name "1a"'],
    ['a reserved label name', 'x{__a="v"} 1\n', 'reserved'],
    ['an unknown escape', 'x{a="\\t"} 1\n', 'unknown escape \\t'],
    ['an unquoted label value', 'x{a=v} 1\n', 'must be quoted'],
    ['an unterminated label value', 'x{a="v} 1\n', 'unterminated'],
    ['a repeated label', 'x{a="1",a="2"} 1\n', 'label a repeated'],
    ['a value that is not a float', 'x 1,5\n', 'is not a float'],
    ['two spaces', 'x  1\n', 'expected one space'],
    ['a bad timestamp', 'x 1 soon\n', 'timestamp'],
    ['a repeated series', 'x{a="1"} 1\nx{a="1"} 2\n', 'repeated'],
    ['TYPE after samples', 'x 1\n# TYPE x gauge\n', 'TYPE of x after its samples'],
    ['a repeated HELP', '# HELP x a\n# HELP x b\nx 1\n', 'HELP of x repeated'],
    ['an unknown type', '# TYPE x meter\nx 1\n', 'is not a metric type'],
    ['split samples', '# TYPE x gauge\nx{a="1"} 1\n# TYPE y gauge\ny 1\nx{a="2"} 1\n', 'not contiguous'],
    ['a negative counter', '# TYPE x_total counter\nx_total -1\n', 'counter x_total is -1'],
    [
      'non-cumulative buckets',
      '# TYPE h histogram\nh_bucket{le="1"} 2\nh_bucket{le="2"} 1\nh_bucket{le="+Inf"} 2\nh_sum 1\nh_count 2\n',
      'not cumulative',
    ],
    ['no +Inf bucket', '# TYPE h histogram\nh_bucket{le="1"} 2\nh_sum 1\nh_count 2\n', 'no le="+Inf"'],
    ['+Inf differing from _count', '# TYPE h histogram\nh_bucket{le="+Inf"} 2\nh_sum 1\nh_count 3\n', '_count 3 differs'],
    ['a missing _sum', '# TYPE h histogram\nh_bucket{le="+Inf"} 2\nh_count 2\n', 'missing _sum or _count'],
    [
      'decreasing le',
      '# TYPE h histogram\nh_bucket{le="2"} 1\nh_bucket{le="1"} 1\nh_bucket{le="+Inf"} 1\nh_sum 1\nh_count 1\n',
      'not increasing',
    ],
    ['no final newline', 'x 1', 'must end with a newline'],
  ])('refuses %s', (_what, text, reason) => {
    expect(() => parseMetricsText(text)).toThrow(reason);
  });
});
