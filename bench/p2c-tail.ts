/**
 * The tail of `p2c:latency` with one backend 10× slower (issue 23): a seeded
 * simulation, not a timing — its figures do not depend on the machine, so
 * rules can be compared where bench/http's figures on a shared 2-core machine
 * cannot.
 *
 * The model (bench/http's slow scenario as a queue): 4 backends answer after
 * 10, 1, 1, 1 ms (timers: they do not queue); `--clients` closed-loop callers
 * (default 32) each keep one request in flight; every request first takes
 * `--cpu` ms (default 0.1) of one shared CPU, first come first served (the
 * client's and the backends' work on a saturated machine: ~10,000 req/s at
 * most, so the fast backends' latency carries the CPU queue, as measured: p50
 * 2–3 ms for a 1 ms backend); and the CPU stalls now and then (an event-loop
 * or GC pause, another process: every 250 ms on average, exponential, for
 * 2–15 ms, uniform) — the latency peaks PeakEWMA holds. The real PowerOfTwo
 * chooses over candidates whose cost is the PeakEWMA kernel's (peak-ewma.ts,
 * an injected clock): `estimate × (pending + 1)`; the latency sample is the
 * request's whole time (CPU queue + backend).
 *
 * Rules: the cost alone with Sōzu's τ = 1 s (poise's τ), Finagle's and
 * linkerd's τ = 10 s, a short τ = 250 ms, and the tail rule (`latencyRatio`
 * k, 2 by default in a router: a candidate whose mean latency — the plain
 * EWMA beside the PeakEWMA, read undecayed while it has a request in
 * flight — is more than k× the other's loses whatever the in-flight
 * counts; within the ratio the cost decides). Two references: a rotation over the four
 * (BalancedPool's shares at equal weights) and P2C over the fast three
 * alone (what the backends allow without the slow one). Reported per rule: throughput, p50 /
 * p99 / p99.9 latency, and the slow backend's share, over `--seconds`
 * simulated seconds (default 30) after 2 s of warm-up, averaged over nothing:
 * one seeded run per rule (`--seed`, default 23).
 *
 * Run: `node dist/bench/p2c-tail.js [--clients 32] [--cpu 0.1] [--seconds 30]`
 * after `npm run build`. Writes bench/results/p2c-tail.json (not with --dry-run).
 */
import { Rng } from '../src/core/rng.js';
import { parseFlags } from '../src/cli/args.js';
import { decayEstimate, ewmaNext, PeakEwma } from '../src/load/peak-ewma.js';
import { PowerOfTwo } from '../src/policy/power-of-two.js';
import { formatTable, writeResults } from './lib/harness.js';

const { values } = parseFlags(process.argv.slice(2), {
  clients: { type: 'string' },
  cpu: { type: 'string' },
  seconds: { type: 'string' },
  seed: { type: 'string' },
  'dry-run': { type: 'boolean' },
});
const num = (raw: string | undefined, fallback: number, flag: string): number => {
  if (raw === undefined) return fallback;
  const x = Number(raw);
  if (!(x > 0)) throw new Error(`${flag}: must be a positive number, got ${JSON.stringify(raw)}`);
  return x;
};
const CLIENTS = Math.round(num(values.clients, 32, '--clients'));
const CPU_MS = num(values.cpu, 0.1, '--cpu');
const SECONDS = num(values.seconds, 30, '--seconds');
const SEED = BigInt(Math.round(num(values.seed, 23, '--seed')));
const WARMUP_MS = 2000;
const DELAYS_MS = [10, 1, 1, 1];
const STALL_EVERY_MS = 250;
const STALL_MIN_MS = 2;
const STALL_MAX_MS = 15;

/**
 * One simulated backend as a policy candidate over the simulation's clock:
 * `load()` is the PeakEWMA cost, `latency()` the plain EWMA the LoadTable
 * keeps beside it (the kernel's `ewmaNext`, decayed on read), as a router's
 * `p2c:latency` candidate reports them (in float ms here, integer µs there).
 */
class SimBackend {
  readonly weight = 1;
  pending = 0;
  private readonly ewma: PeakEwma;
  private mean = 50;
  /** The mean is the initial estimate until the first sample replaces it (ewma-region.ts). */
  private prior = true;
  private at = 0;
  constructor(
    readonly id: string,
    private readonly clock: () => number,
    private readonly tauMs: number,
  ) {
    this.ewma = new PeakEwma({ clock, tauMs });
  }
  isEligible(): boolean {
    return true;
  }
  load(): number {
    return this.ewma.cost(this.pending);
  }
  /** As recorded while a request is in flight, decayed otherwise (slot-candidate.ts). */
  latency(): number {
    return this.pending > 0 ? this.mean : decayEstimate(this.mean, this.at, this.clock(), this.tauMs);
  }
  observe(sampleMs: number): void {
    const now = this.clock();
    this.ewma.observe(sampleMs);
    this.mean = this.prior ? sampleMs : ewmaNext(this.mean, Math.exp(-(now - this.at) / this.tauMs), sampleMs);
    this.prior = false;
    this.at = now;
  }
}

interface Rule {
  name: string;
  tauMs: number;
  latencyRatio?: number;
  /** 'rotation': a plain rotation over the 4 (BalancedPool's shares at equal weights); 'fast only': P2C over b1..b3. */
  choose?: 'rotation' | 'fast only';
}

const RULES: Rule[] = [
  { name: 'rotation (BalancedPool)', tauMs: 1000, choose: 'rotation' },
  { name: 'fast only (reference)', tauMs: 1000, choose: 'fast only' },
  { name: 'cost alone, τ 1 s', tauMs: 1000 },
  { name: 'cost alone, τ 10 s (Finagle, linkerd)', tauMs: 10_000 },
  { name: 'cost alone, τ 250 ms', tauMs: 250 },
  { name: 'latencyRatio 4', tauMs: 1000, latencyRatio: 4 },
  { name: 'latencyRatio 3', tauMs: 1000, latencyRatio: 3 },
  { name: 'latencyRatio 2 (the default)', tauMs: 1000, latencyRatio: 2 },
  { name: 'latencyRatio 1.5', tauMs: 1000, latencyRatio: 1.5 },
  { name: 'latencyRatio 2, τ 10 s', tauMs: 10_000, latencyRatio: 2 },
  { name: 'latencyRatio 2, τ 250 ms', tauMs: 250, latencyRatio: 2 },
  { name: 'latencyRatio 1.2', tauMs: 1000, latencyRatio: 1.2 },
  { name: 'latencyRatio 1 (latency alone)', tauMs: 1000, latencyRatio: 1 },
];

/**
 * One seeded run. `turns`: b0 answers in 1 ms like the others until the middle
 * of the measured time, then in 10 ms (bench/http's turns-slow); the figures
 * are then the second half's.
 */
function run(rule: Rule, turns = false): Record<string, unknown> {
  let now = 0;
  const clock = (): number => now;
  const backends = DELAYS_MS.map((_, i) => new SimBackend(`b${i}`, clock, rule.tauMs));
  const p2c = new PowerOfTwo({ seed: SEED, latencyRatio: rule.latencyRatio });
  const noise = new Rng(SEED + 1n);
  const endMs = WARMUP_MS + SECONDS * 1000;
  const turnMs = turns ? WARMUP_MS + (SECONDS * 1000) / 2 : 0;
  const from = turns ? turnMs : WARMUP_MS;
  // Stalls: [start, end) intervals of the CPU, drawn ahead.
  const stalls: number[] = [];
  for (let t = -Math.log(1 - noise.float()) * STALL_EVERY_MS; t < endMs; t += -Math.log(1 - noise.float()) * STALL_EVERY_MS)
    stalls.push(t, t + STALL_MIN_MS + noise.float() * (STALL_MAX_MS - STALL_MIN_MS));
  let stall = 0;
  let cpuFree = 0;
  // In flight: per client, its backend, start and completion time.
  const on = new Int32Array(CLIENTS);
  const started = new Float64Array(CLIENTS);
  const done = new Float64Array(CLIENTS);
  const latencies: number[] = [];
  const served = [0, 0, 0, 0];
  const fast = backends.slice(1);
  let turn = 0;
  const choose = (): number => {
    if (rule.choose === 'rotation') return turn++ % backends.length;
    if (rule.choose === 'fast only') return 1 + p2c.pick(fast);
    return p2c.pick(backends);
  };
  const send = (c: number): void => {
    const b = choose();
    backends[b]!.pending++;
    on[c] = b;
    started[c] = now;
    // FIFO CPU: wait for it, and past any stall it runs into.
    let t = Math.max(now, cpuFree);
    while (stall < stalls.length && stalls[stall + 1]! <= t) stall += 2;
    if (stall < stalls.length && stalls[stall]! <= t + CPU_MS) t = Math.max(t, stalls[stall + 1]!);
    cpuFree = t + CPU_MS;
    done[c] = cpuFree + (b === 0 && now < turnMs ? DELAYS_MS[1]! : DELAYS_MS[b]!);
  };
  for (let c = 0; c < CLIENTS; c++) send(c);
  for (;;) {
    let c = 0;
    for (let k = 1; k < CLIENTS; k++) if (done[k]! < done[c]!) c = k;
    now = done[c]!;
    if (now >= endMs) break;
    const b = backends[on[c]!]!;
    b.pending--;
    b.observe(now - started[c]!);
    if (started[c]! >= from) {
      latencies.push(now - started[c]!);
      served[on[c]!]!++;
    }
    send(c);
  }
  const sorted = Float64Array.from(latencies).sort();
  const q = (x: number): number => Math.round(sorted[Math.min(sorted.length - 1, Math.floor(x * sorted.length))]! * 100) / 100;
  return {
    rule: rule.name,
    'req/s': Math.round(latencies.length / ((endMs - from) / 1000)),
    p50: q(0.5),
    p99: q(0.99),
    p999: q(0.999),
    'slow %': Math.round((1000 * served[0]!) / latencies.length) / 10,
  };
}

const rows = RULES.map((r) => run(r));
const turnsRows = RULES.map((r) => run(r, true));
process.stdout.write(
  `${CLIENTS} closed-loop clients, CPU ${CPU_MS} ms per request, backends ${DELAYS_MS.join(' / ')} ms, ${SECONDS} s simulated, seed ${SEED}\n\n` +
    `slow: b0 10× slower throughout\n${formatTable(rows)}\n\nturns-slow: b0 1 ms, 10 ms from the middle (the second half's figures)\n${formatTable(turnsRows)}\n`,
);
if (values['dry-run'] !== true) {
  const file = writeResults('p2c-tail', {
    config: { clients: CLIENTS, cpuMs: CPU_MS, seconds: SECONDS, seed: Number(SEED), delaysMs: DELAYS_MS },
    rows,
    turnsSlow: turnsRows,
  });
  process.stdout.write(`wrote ${file}\n`);
}
