/**
 * A strict parser of the Prometheus text exposition format (version 0.0.4):
 * what `poise top --metrics` reads from a running proxy, and what the tests
 * hold every scrape to. Strict means it refuses what Prometheus would
 * refuse or silently mangle: a bad metric or label name, an unknown escape
 * in a label value, HELP/TYPE repeated or after samples, a family's samples
 * split apart, a duplicate series, a histogram whose buckets are not
 * cumulative or lack `le="+Inf"` equal to `_count`, a negative counter.
 */
import { PoiseError } from '../core/errors.js';

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
/**
 * A sample value as Prometheus reads it (Go's strconv.ParseFloat): a decimal
 * float, a signed `Inf` / `Infinity`, or `NaN`, the special words in any
 * case (prom-client writes NaN as `Nan`).
 */
const FLOAT = /^(?:[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?|inf(?:inity)?)|nan)$/i;

function fail(line: number, reason: string): never {
  throw new PoiseError('Corrupt', `metrics text line ${line}: ${reason}`, { field: `line ${line}` });
}

function parseValue(raw: string, line: number): number {
  if (!FLOAT.test(raw)) fail(line, `value ${JSON.stringify(raw)} is not a float`);
  if (/^nan$/i.test(raw)) return Number.NaN;
  if (/inf/i.test(raw)) return raw.startsWith('-') ? -Infinity : Infinity;
  return Number(raw);
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
    let v = '';
    let j = eq + 2;
    for (; ; j++) {
      const c = text[j];
      if (c === undefined) fail(line, `label ${name}: unterminated value`);
      if (c === '"') break;
      if (c === '\n') fail(line, `label ${name}: raw newline in value`);
      if (c === '\\') {
        const e = text[++j];
        if (e === '\\') v += '\\';
        else if (e === '"') v += '"';
        else if (e === 'n') v += '\n';
        else fail(line, `label ${name}: unknown escape \\${e ?? ''}`);
      } else {
        v += c;
      }
    }
    labels[name] = v;
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

/**
 * Parses exposition text into its families, by name, in order. Throws
 * `PoiseError` `Corrupt` naming the line and the rule broken.
 */
export function parseMetricsText(text: string): Map<string, MetricFamily> {
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
    if (raw.trim() === '') return;
    if (raw.startsWith('#')) {
      const m = /^# (HELP|TYPE) (\S+)(?: (.*))?$/.exec(raw);
      if (m === null) return; // a plain comment
      const [, kind, name, rest = ''] = m as unknown as [string, string, string, string | undefined];
      if (!METRIC.test(name)) fail(n, `metric name ${JSON.stringify(name)} is not [a-zA-Z_:][a-zA-Z0-9_:]*`);
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
    const m = /^([^\s{]+)(.*)$/.exec(raw);
    if (m === null) fail(n, 'not a sample');
    const name = m[1]!;
    if (!METRIC.test(name)) fail(n, `metric name ${JSON.stringify(name)} is not [a-zA-Z_:][a-zA-Z0-9_:]*`);
    let rest = m[2]!;
    let labels: Record<string, string> = {};
    if (rest.startsWith('{')) ({ labels, rest } = parseLabels(rest, n));
    const parts = rest.split(' ');
    if (parts[0] !== '' || parts.length < 2 || parts.length > 3 || parts.slice(1).includes(''))
      fail(n, 'expected one space, a value and an optional timestamp after the name and labels');
    const value = parseValue(parts[1]!, n);
    if (parts.length === 3 && !/^-?\d+$/.test(parts[2]!)) fail(n, `timestamp ${JSON.stringify(parts[2])} is not an integer`);
    const family = open(familyOf(name, families), n);
    const key = `${name}${JSON.stringify(Object.entries(labels).sort())}`;
    if (seen.has(key)) fail(n, `series ${name}${JSON.stringify(labels)} repeated`);
    seen.add(key);
    if (family.type === 'counter' && !(value >= 0)) fail(n, `counter ${name} is ${value}`);
    if (family.type === 'histogram' && name === family.name) fail(n, `histogram ${name}: a sample must be _bucket, _sum or _count`);
    family.samples.push({ name, labels, value });
  });
  for (const f of families.values()) if (f.type === 'histogram') checkHistogram(f);
  return families;
}
