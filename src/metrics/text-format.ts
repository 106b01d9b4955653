/**
 * A strict parser of the Prometheus text exposition format (version 0.0.4):
 * what `poise top --metrics` reads from a running proxy, and what the tests
 * hold every scrape to. Strict means it refuses what Prometheus would
 * refuse or silently mangle: a bad metric or label name, an unknown escape
 * in a label value, HELP/TYPE repeated or after samples, a family's samples
 * split apart, a duplicate series, a histogram whose buckets are not
 * cumulative or lack `le="+Inf"` equal to `_count`, a negative counter.
 * Values are read as Prometheus reads them (text-float.ts).
 *
 * Linear in the length of the text: every scan moves forward (no pattern
 * that can backtrack over a long run), so a hostile body costs its size.
 */
import { PoiseError } from '../core/errors.js';
import { parseTextFloat } from './text-float.js';

/** One sample line. */
export interface Sample {
  /** The sample's own name (a histogram's `x_bucket`, `x_sum`, `x_count`). */
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** A metric family: its HELP, TYPE and samples in order. */
export interface MetricFamily {
  readonly name: string;
  readonly help: string | undefined;
  readonly type: 'counter' | 'gauge' | 'histogram' | 'summary' | 'untyped';
  readonly samples: Sample[];
}

const METRIC = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/;
const LABEL = /^[a-zA-Z_][a-zA-Z0-9_]*$/;
const TYPES = new Set(['counter', 'gauge', 'histogram', 'summary', 'untyped']);

function fail(line: number, reason: string): never {
  throw new PoiseError('Corrupt', `metrics text line ${line}: ${reason}`, { field: `line ${line}` });
}

/** `raw` quoted for a message, cut to its first 40 characters (a refused value may be megabytes long). */
function quote(raw: string): string {
  return raw.length <= 40 ? JSON.stringify(raw) : `${JSON.stringify(raw.slice(0, 40))}… (${raw.length} characters)`;
}

function parseValue(raw: string, line: number): number {
  const v = parseTextFloat(raw);
  if (v === 'syntax') fail(line, `value ${quote(raw)} is not a float`);
  if (v === 'range') fail(line, `value ${quote(raw)} is out of the float64 range`);
  return v;
}

/** Parses `{a="x",b="y"}` starting at `text[0] === '{'`; returns the labels and the rest after `}`. */
function parseLabels(text: string, line: number): { labels: Record<string, string>; rest: string } {
  const labels: Record<string, string> = {};
  let i = 1;
  for (;;) {
    if (text[i] === '}') return { labels, rest: text.slice(i + 1) };
    const eq = text.indexOf('=', i);
    if (eq < 0) fail(line, 'label without "="');
    const name = text.slice(i, eq);
    if (!LABEL.test(name)) fail(line, `label name ${JSON.stringify(name)} is not [a-zA-Z_][a-zA-Z0-9_]*`);
    if (name.startsWith('__')) fail(line, `label name ${JSON.stringify(name)} is reserved (starts with "__")`);
    if (Object.hasOwn(labels, name)) fail(line, `label ${name} repeated`);
    if (text[eq + 1] !== '"') fail(line, `label ${name}: value must be quoted`);
    // Runs without an escape are sliced whole; each character is looked at once.
    let v = '';
    let j = eq + 2;
    let run = j;
    for (; ; j++) {
      const c = text[j];
      if (c === undefined) fail(line, `label ${name}: unterminated value`);
      if (c === '"') break;
      if (c === '\n') fail(line, `label ${name}: raw newline in value`);
      if (c === '\\') {
        v += text.slice(run, j);
        const e = text[++j];
        if (e === '\\') v += '\\';
        else if (e === '"') v += '"';
        else if (e === 'n') v += '\n';
        else fail(line, `label ${name}: unknown escape \\${e ?? ''}`);
        run = j + 1;
      }
    }
    labels[name] = v + text.slice(run, j);
    i = j + 1;
    if (text[i] === ',') i++;
    else if (text[i] !== '}') fail(line, `after label ${name}: expected "," or "}"`);
  }
}

/** The family a sample name belongs to, given the declared families. */
function familyOf(name: string, families: ReadonlyMap<string, MetricFamily>): string {
  for (const suffix of ['_bucket', '_sum', '_count']) {
    if (name.endsWith(suffix)) {
      const base = name.slice(0, -suffix.length);
      const f = families.get(base);
      if (f !== undefined && (f.type === 'histogram' || f.type === 'summary')) return base;
    }
  }
  return name;
}

/** Checks a histogram family: per label set, cumulative buckets, `+Inf` = `_count`, a `_sum`. */
function checkHistogram(f: MetricFamily): void {
  const groups = new Map<string, { les: [number, number][]; sum?: number; count?: number }>();
  for (const s of f.samples) {
    const { le, ...rest } = s.labels;
    const key = JSON.stringify(Object.entries(rest).sort());
    let g = groups.get(key);
    if (g === undefined) {
      g = { les: [] };
      groups.set(key, g);
    }
    if (s.name === `${f.name}_bucket`) {
      if (le === undefined) throw new PoiseError('Corrupt', `histogram ${f.name}: a _bucket sample without le`, { field: f.name });
      g.les.push([le === '+Inf' ? Infinity : Number(le), s.value]);
    } else if (s.name === `${f.name}_sum`) g.sum = s.value;
    else if (s.name === `${f.name}_count`) g.count = s.value;
    else throw new PoiseError('Corrupt', `histogram ${f.name}: unexpected sample ${s.name}`, { field: f.name });
  }
  for (const g of groups.values()) {
    for (let k = 1; k < g.les.length; k++) {
      if (!(g.les[k]![0] > g.les[k - 1]![0]))
        throw new PoiseError('Corrupt', `histogram ${f.name}: le bounds not increasing`, { field: f.name });
      if (g.les[k]![1] < g.les[k - 1]![1])
        throw new PoiseError('Corrupt', `histogram ${f.name}: bucket counts not cumulative`, { field: f.name });
    }
    const last = g.les[g.les.length - 1];
    if (last === undefined || last[0] !== Infinity)
      throw new PoiseError('Corrupt', `histogram ${f.name}: no le="+Inf" bucket`, { field: f.name });
    if (g.count === undefined || g.sum === undefined)
      throw new PoiseError('Corrupt', `histogram ${f.name}: missing _sum or _count`, { field: f.name });
    if (g.count !== last[1])
      throw new PoiseError('Corrupt', `histogram ${f.name}: _count ${g.count} differs from the +Inf bucket ${last[1]}`, { field: f.name });
  }
}

/** Options of {@link parseMetricsText}. */
export interface ParseMetricsOptions {
  /**
   * Give up once `now()` passes this instant (checked every 256 lines and
   * before the histogram checks), so a caller's one deadline covers the
   * parse as well as the fetch; default none.
   */
  deadline?: number;
  /** The clock `deadline` is read against; default `Date.now`. */
  now?: () => number;
}

/**
 * Parses exposition text into its families, by name, in order. Throws
 * `PoiseError` `Corrupt` naming the line and the rule broken, or
 * `Unavailable` when `options.deadline` passes first. Time and memory are
 * linear in the length of `text`.
 *
 * @example
 * const families = parseMetricsText('# TYPE up gauge\nup 1\n');
 * families.get('up')?.samples[0]?.value; // 1
 */
export function parseMetricsText(text: string, options: ParseMetricsOptions = {}): Map<string, MetricFamily> {
  const { deadline, now = Date.now } = options;
  const pastDeadline = (n: number): void => {
    if (deadline !== undefined && now() > deadline)
      throw new PoiseError('Unavailable', `metrics text: the deadline passed while parsing (at line ${n})`, { field: 'deadline' });
  };
  const families = new Map<string, MetricFamily>();
  const seen = new Set<string>();
  const closed = new Set<string>();
  let current: string | undefined;
  const lines = text.split('\n');
  if (lines[lines.length - 1] !== '') fail(lines.length, 'the text must end with a newline');
  lines.pop();
  const open = (name: string, n: number): MetricFamily => {
    if (current !== name) {
      if (closed.has(name)) fail(n, `samples of ${name} are not contiguous`);
      if (current !== undefined) closed.add(current);
      current = name;
    }
    let f = families.get(name);
    if (f === undefined) {
      f = { name, help: undefined, type: 'untyped', samples: [] };
      families.set(name, f);
    }
    return f;
  };
  lines.forEach((raw, idx) => {
    const n = idx + 1;
    if ((idx & 255) === 0) pastDeadline(n);
    if (raw.trim() === '') return;
    if (raw.startsWith('#')) {
      // The docstring is the rest of the line, whatever it holds ("." would stop at a CR or U+2028).
      const m = /^# (HELP|TYPE) (\S+)(?: ([\s\S]*))?$/.exec(raw);
      if (m === null) return; // a plain comment
      const [, kind, name, rest = ''] = m as unknown as [string, string, string, string | undefined];
      if (!METRIC.test(name)) fail(n, `metric name ${quote(name)} is not [a-zA-Z_:][a-zA-Z0-9_:]*`);
      const f = open(name, n);
      if (f.samples.length > 0) fail(n, `${kind} of ${name} after its samples`);
      if (kind === 'HELP') {
        if (f.help !== undefined) fail(n, `HELP of ${name} repeated`);
        if (/\\[^\\n]/.test(rest.replace(/\\\\/g, ''))) fail(n, `HELP of ${name}: unknown escape`);
        (f as { help: string | undefined }).help = rest.replace(/\\(\\|n)/g, (_s, e: string) => (e === 'n' ? '\n' : '\\'));
      } else {
        if (!TYPES.has(rest)) fail(n, `TYPE of ${name}: ${JSON.stringify(rest)} is not a metric type`);
        if ((f as { typed?: boolean }).typed === true) fail(n, `TYPE of ${name} repeated`);
        (f as { typed?: boolean }).typed = true;
        (f as { type: string }).type = rest;
      }
      return;
    }
    // The name runs to the first blank or "{" (a one-character search: it cannot backtrack).
    const cut = raw.search(/[\s{]/);
    if (cut === 0) fail(n, 'not a sample');
    const name = cut < 0 ? raw : raw.slice(0, cut);
    if (!METRIC.test(name)) fail(n, `metric name ${quote(name)} is not [a-zA-Z_:][a-zA-Z0-9_:]*`);
    let rest = cut < 0 ? '' : raw.slice(cut);
    let labels: Record<string, string> = {};
    if (rest.startsWith('{')) ({ labels, rest } = parseLabels(rest, n));
    const parts = rest.split(' ');
    if (parts[0] !== '' || parts.length < 2 || parts.length > 3 || parts.slice(1).includes(''))
      fail(n, 'expected one space, a value and an optional timestamp after the name and labels');
    const value = parseValue(parts[1]!, n);
    if (parts.length === 3 && !/^-?\d+$/.test(parts[2]!)) fail(n, `timestamp ${quote(parts[2]!)} is not an integer`);
    const family = open(familyOf(name, families), n);
    const key = `${name}${JSON.stringify(Object.entries(labels).sort())}`;
    if (seen.has(key)) fail(n, `series ${name}${JSON.stringify(labels)} repeated`);
    seen.add(key);
    if (family.type === 'counter' && !(value >= 0)) fail(n, `counter ${name} is ${value}`);
    if (family.type === 'histogram' && name === family.name) fail(n, `histogram ${name}: a sample must be _bucket, _sum or _count`);
    family.samples.push({ name, labels, value });
  });
  pastDeadline(lines.length);
  for (const f of families.values()) if (f.type === 'histogram') checkHistogram(f);
  return families;
}
