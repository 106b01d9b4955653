/**
 * What one membership change of one backend costs each stage of a reader
 * process, in one thread with nothing else running (compiled to
 * dist/bench/membership-stages.js):
 *
 *   node dist/bench/membership-stages.js [--backends N] [--changes N] [--rounds N]
 *
 * A change is a delta notice's `replace` of one backend's weight (a
 * different backend each time). Stages, as a RedisMembership bound to a
 * Balancer runs them:
 * - delta apply: `applyDelta` (ops on the held document, the set check,
 *   the canonical JSON and its SHA-1 digest);
 * - Balancer.apply: validation, slot planning, the spec blob encoded and
 *   published, the epoch bump;
 * - router rebuild: one Router's refresh (copy of the blob, its lines, the
 *   candidate view), measured on each of 2 routers and averaged.
 *
 * `--rounds` interleaves rounds of `--changes` changes and reports the median
 * round (ms per change), so a noisy moment moves one round, not the figure.
 * Run it from two builds to compare them: `node <tree>/dist/bench/membership-stages.js`.
 */
import { performance } from 'node:perf_hooks';
import { documentJson, resolveDocument, type ResolvedDocument } from '../src/membership/document.js';
import { applyDelta, documentDigest, resolveOps } from '../src/membership/delta.js';
import { Balancer, createLogger } from '../src/runtime.js';
import { formatTable, progress, progressDone, writeResults } from './lib/harness.js';

function arg(name: string): string | undefined {
  const i = process.argv.indexOf(`--${name}`);
  return i < 0 ? undefined : process.argv[i + 1];
}
const BACKENDS = Number(arg('backends') ?? 1000);
const CHANGES = Number(arg('changes') ?? 200);
const ROUNDS = Number(arg('rounds') ?? 9);
const WARMUP = 100;

let doc: ResolvedDocument = resolveDocument({
  cluster: 'stages',
  backends: Array.from({ length: BACKENDS }, (_, i) => ({ id: `b${i}`, address: `127.0.0.1:${10_000 + i}`, weight: 1 + (i % 100) })),
});
const balancer = new Balancer({ capacity: 2 * BACKENDS, logger: createLogger({ level: 'warn' }) });
let version = balancer.update({ version: 1, backends: doc.backends });
const routers = [balancer.router(), balancer.router()];
for (const r of routers) r.refresh();

let k = 0;
/** One change through every stage; adds each stage's ms to `into`. */
function change(into: { delta: number; apply: number; rebuild: number }): void {
  const at = (k * 7919) % BACKENDS;
  const b = doc.backends[at]!;
  const ops = resolveOps([{ op: 'replace', backend: { id: b.id, address: b.address, weight: 1 + ((k * 31) % 100) } }], 'notice.ops');
  k++;
  // The publisher's digest of the document the ops produce (not timed: the publisher's cost, not the reader's).
  const expected = { ...doc, backends: doc.backends.map((x, i) => (i === at ? (ops[0] as { backend: typeof x }).backend : x)) };
  const digest = documentDigest(documentJson(expected));
  const t0 = performance.now();
  const next = applyDelta(doc, ops, digest, { maxBytes: 1 << 20, what: 'notice' });
  const t1 = performance.now();
  version = balancer.update({ version: version + 1, backends: next.backends });
  const t2 = performance.now();
  for (const r of routers) r.refresh();
  const t3 = performance.now();
  doc = next;
  into.delta += t1 - t0;
  into.apply += t2 - t1;
  into.rebuild += (t3 - t2) / routers.length;
}

const sink = { delta: 0, apply: 0, rebuild: 0 };
for (let i = 0; i < WARMUP; i++) change(sink);
const rounds: { delta: number; apply: number; rebuild: number }[] = [];
for (let r = 0; r < ROUNDS; r++) {
  const acc = { delta: 0, apply: 0, rebuild: 0 };
  for (let i = 0; i < CHANGES; i++) change(acc);
  rounds.push({ delta: acc.delta / CHANGES, apply: acc.apply / CHANGES, rebuild: acc.rebuild / CHANGES });
  progress(`round ${r + 1}/${ROUNDS}`);
}
progressDone();
const median = (xs: number[]): number => xs.slice().sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const stages = {
  deltaApplyMs: median(rounds.map((r) => r.delta)),
  balancerApplyMs: median(rounds.map((r) => r.apply)),
  routerRebuildMs: median(rounds.map((r) => r.rebuild)),
};
const perProcess = stages.deltaApplyMs + stages.balancerApplyMs + 2 * stages.routerRebuildMs;
console.log(`\none-backend change, ${BACKENDS} backends: median of ${ROUNDS} rounds of ${CHANGES} changes (ms per change)`);
console.log(
  formatTable([
    { stage: 'delta apply (reader)', 'ms/change': stages.deltaApplyMs },
    { stage: 'Balancer.apply (owner)', 'ms/change': stages.balancerApplyMs },
    { stage: 'router rebuild (each router)', 'ms/change': stages.routerRebuildMs },
    { stage: 'a reader process with 2 routers', 'ms/change': perProcess },
  ]),
);
balancer.close();
const file = writeResults('membership-stages', {
  backends: BACKENDS,
  changes: CHANGES,
  rounds: ROUNDS,
  stages,
  perProcessMs: perProcess,
  allRounds: rounds,
});
console.log(`results: ${file}`);
