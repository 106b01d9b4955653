/**
 * Metrics-text parse benchmark: `parseMetricsText` is linear in the length
 * of the text, so doubling a hostile run doubles its cost (a backtracking
 * float pattern made it quadratic: 20k / 40k / 80k digits took 232 / 943 /
 * 3,650 ms).
 *
 * 1. Long runs at 20,000 / 40,000 / 80,000 characters, one line each:
 *    digits then a bad character (`x 111…1x`, refused: the quadratic case),
 *    an in-range value of that many digits (`x 0.111…1`), a label value of
 *    that length, a name of that length ended by a carriage return
 *    (refused). Median over 15 rounds (5 with --quick) of the mean of 10
 *    parses, sizes interleaved, after 10 warm-up parses of each; and the
 *    ratio to the 20,000 figure (linear: ~2 and ~4).
 * 2. A body at the `poise top` cap (16 MiB of typical backend sample lines;
 *    1 MiB with --quick): median ms of 5 parses (3), and MB/s.
 *
 * Run: `npm run bench:metrics-parse` (or `node dist/bench/metrics-parse.js
 * --quick` after `npm run build`). Writes bench/results/metrics-parse.json.
 */
import { parseMetricsText } from '../src/metrics/text-format.js';
import { formatTable, progress, progressDone, writeResults } from './lib/harness.js';

const QUICK = process.argv.includes('--quick');
const SIZES = [20_000, 40_000, 80_000];

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** One parse of `text`, ms; a refusal counts as a parse (timed to the refusal). */
function parseMs(text: string): number {
  const t0 = performance.now();
  try {
    parseMetricsText(text);
  } catch {
    // refused inputs are timed to their refusal
  }
  return performance.now() - t0;
}

/**
 * Median ms per parse of each text: 10 warm-up parses of each, then `rounds`
 * rounds that visit the texts in turn (so drift in the machine's load hits
 * every size alike); a sample is the mean of `reps` parses.
 */
function timeParses(texts: readonly string[], rounds: number, reps: number): number[] {
  for (const t of texts) for (let i = 0; i < 10; i++) parseMs(t);
  const samples = texts.map((): number[] => []);
  for (let r = 0; r < rounds; r++) {
    texts.forEach((t, k) => {
      let sum = 0;
      for (let i = 0; i < reps; i++) sum += parseMs(t);
      samples[k]!.push(sum / reps);
    });
  }
  return samples.map(median);
}

const CASES: Record<string, (n: number) => string> = {
  'digits then x (refused)': (n) => `x ${'1'.repeat(n)}x\n`,
  'in-range value': (n) => `x 0.${'1'.repeat(n)}\n`,
  'label value': (n) => `x{a="${'a'.repeat(n)}"} 1\n`,
  'name then CR (refused)': (n) => `x${'a'.repeat(n)}\r 1\n`,
};

const rounds = QUICK ? 5 : 15;
const reps = 10;
const longRuns: Record<string, unknown>[] = [];
for (const [what, make] of Object.entries(CASES)) {
  progress(what);
  const ms = timeParses(
    SIZES.map((n) => make(n)),
    rounds,
    reps,
  );
  longRuns.push({
    case: what,
    ...Object.fromEntries(SIZES.map((n, k) => [`ms@${n / 1000}k`, ms[k]!])),
    'x40k/20k': ms[1]! / ms[0]!,
    'x80k/20k': ms[2]! / ms[0]!,
  });
}

const capBytes = QUICK ? 1 << 20 : 16 << 20;
const lines: string[] = [];
let bytes = 0;
for (let i = 0; bytes < capBytes; i++) {
  const line = `poise_backend_connections{cluster="api",backend="backend-${i}",priority="${i % 3}",locality="zone-${i % 4}"} ${i % 97}\n`;
  lines.push(line);
  bytes += line.length;
}
const body = `# HELP poise_backend_connections Open connection leases.\n# TYPE poise_backend_connections gauge\n${lines.join('')}`;
progress(`a ${(body.length / 1048576).toFixed(1)} MiB body`);
const bodyMs = timeParses([body], QUICK ? 3 : 5, 1)[0]!;
progressDone();
const capRow = { bytes: body.length, lines: lines.length, ms: bodyMs, 'MB/s': body.length / 1e6 / (bodyMs / 1000) };

console.log('Long runs (one line each): median ms per parse, and the ratio to 20k (linear: ~2, ~4)');
console.log(formatTable(longRuns));
console.log('\nA body at the poise top cap');
console.log(formatTable([capRow]));
const file = writeResults('metrics-parse', { quick: QUICK, rounds, reps, longRuns, capBody: capRow });
console.log(`\nwrote ${file}`);
