/**
 * Which weighted power of two choices follows weights (issue 28): a seeded
 * simulation, not a timing — its figures do not depend on the machine.
 *
 * Three rules, each reading exactly two loads per pick:
 * - A `uniform pair, load ÷ weight`: Sōzu's two distinct uniform draws, the
 *   lower load ÷ weight (cross-multiplied), a tie to a coin;
 * - B `weighted pair, load` (PowerOfTwo's rule): two independent draws by
 *   weight (alias table), the lower load, a tie to a coin;
 * - C `weighted pair, load ÷ weight`: B's draws, A's comparison;
 * - D `weighted pair, equal → coin, else load ÷ weight`: B at equal loads,
 *   C otherwise.
 *
 * Scenarios over weights 1 : 2 : 3 : 4: equal loads held at 0, equal loads
 * held at 7 (the README case: p2c:latency with equal estimates), nearly
 * equal loads (each read 1,000 plus a uniform 0..9: latency estimates with
 * noise, every lease released at once), and held load (every pick holds a
 * lease for the next 40 picks, so loads move with the picks). The figure is the largest |share − wᵢ/Σw| over the members,
 * in share points, over 400,000 picks (binomial noise ≈ 0.08 points).
 *
 * Run: `node dist/bench/weighted-p2c.js` after `npm run build`. Writes
 * bench/results/weighted-p2c.json.
 */
import { Backend } from '../src/core/candidate.js';
import { Rng } from '../src/core/rng.js';
import { AliasTable } from '../src/policy/alias.js';
import { formatTable, writeResults } from './lib/harness.js';

const WEIGHTS = [1, 2, 3, 4];
const TOTAL = 10;
const PICKS = 400_000;
const HOLD = 40;

type Rule = (loads: readonly number[], rng: Rng) => number;

const alias = new AliasTable();
alias.build(WEIGHTS.map((w, i) => new Backend(`b${i}`, { weight: w })));

function lighter(a: number, la: number, b: number, lb: number, rng: Rng): number {
  if (la < lb) return a;
  if (lb < la) return b;
  return rng.coin() ? b : a;
}

const RULES: Record<string, Rule> = {
  'A uniform pair, load ÷ weight': (loads, rng) => {
    const n = WEIGHTS.length;
    const a = rng.below(n);
    let b = rng.below(n - 1);
    if (b >= a) b++;
    return lighter(a, loads[a]! * WEIGHTS[b]!, b, loads[b]! * WEIGHTS[a]!, rng);
  },
  'B weighted pair, load (chosen)': (loads, rng) => {
    const a = alias.draw(rng);
    const b = alias.draw(rng);
    return a === b ? a : lighter(a, loads[a]!, b, loads[b]!, rng);
  },
  'C weighted pair, load ÷ weight': (loads, rng) => {
    const a = alias.draw(rng);
    const b = alias.draw(rng);
    return a === b ? a : lighter(a, loads[a]! * WEIGHTS[b]!, b, loads[b]! * WEIGHTS[a]!, rng);
  },
  'D weighted pair, equal → coin, else load ÷ weight': (loads, rng) => {
    const a = alias.draw(rng);
    const b = alias.draw(rng);
    if (a === b) return a;
    if (loads[a] === loads[b]) return rng.coin() ? b : a;
    return lighter(a, loads[a]! * WEIGHTS[b]!, b, loads[b]! * WEIGHTS[a]!, rng);
  },
};

/** Largest |share − w/Σw| in share points over PICKS picks of `rule`. */
function deviation(rule: Rule, scenario: 'zero' | 'seven' | 'noisy' | 'held'): number {
  const rng = new Rng(28);
  const noise = new Rng(82);
  const loads = WEIGHTS.map((): number => (scenario === 'seven' ? 7 : 0));
  const counts = WEIGHTS.map(() => 0);
  const ring = new Int32Array(HOLD).fill(-1);
  for (let k = 0; k < PICKS; k++) {
    if (scenario === 'noisy') for (let j = 0; j < loads.length; j++) loads[j] = 1000 + noise.below(10);
    const i = rule(loads, rng);
    counts[i]!++;
    if (scenario === 'held') {
      const done = ring[k % HOLD]!;
      if (done >= 0) loads[done]!--;
      loads[i]!++;
      ring[k % HOLD] = i;
    }
  }
  return Math.max(...counts.map((c, i) => Math.abs((100 * c) / PICKS - (100 * WEIGHTS[i]!) / TOTAL)));
}

const rows = Object.entries(RULES).map(([name, rule]) => ({
  rule: name,
  'equal loads 0': deviation(rule, 'zero'),
  'equal loads 7': deviation(rule, 'seven'),
  'nearly equal (1000 + 0..9)': deviation(rule, 'noisy'),
  [`held ${HOLD} picks`]: deviation(rule, 'held'),
}));
console.log('largest |share − w/Σw| in share points, weights 1:2:3:4, 400,000 picks, seed 28');
console.log(formatTable(rows));
const file = writeResults('weighted-p2c', { weights: WEIGHTS, picks: PICKS, hold: HOLD, rows });
console.log(`\nwrote ${file}`);
