/**
 * The V8 young generation of `poise proxy`: kept at its initial size in
 * every thread of the process when worker threads carry the traffic.
 *
 * V8 grows an isolate's new space (doubling, `--semi-space-growth-factor`
 * 2) whenever a scavenge finds most of it surviving, which is what loading
 * a module graph looks like; it shrinks it back only at a later GC with a
 * low allocation rate, and an idle thread runs none. So each isolate keeps
 * the young generation its startup grew: on Node 24 the main thread's grew
 * to 7.4 MB (0.2 MB of it in use), for a thread that afterwards only
 * serves membership, health checks and /metrics.
 *
 * `--max-semi-space-size` is read once, when an isolate is created, so it
 * cannot be applied from inside the process; the growth factor is read at
 * every growth, so setting it to 1 before the proxy's modules load (main.ts,
 * when the command is `proxy`) keeps the main thread's new space at 2 MB
 * (V8 starts it at 1 MB and takes one step at its first scavenge). The
 * proxy workers, started with it in force, idled at 2 MB of new space too on
 * Node 24 rather than their cap (`TcpProxy`'s `youngGenerationMb`, 4 MB,
 * which still bounds them: Node 20's V8 grows a worker's young generation
 * to its cap whatever the factor). With `--workers 0` the main thread
 * accepts and carries the traffic, so proxy.ts gives V8 its default growth
 * back. Measured in docs/benchmarks.md ("Where idle RSS goes").
 * @internal
 */
import v8 from 'node:v8';

/** V8's default `--semi-space-growth-factor` (Node 20 and 24). */
const DEFAULT_GROWTH = 2;

/** From now on no isolate's young generation grows past the first step V8 takes from its initial 1 MB (V8 `--semi-space-growth-factor=1`). @internal */
export function keepYoungGenerationsSmall(): void {
  v8.setFlagsFromString('--semi-space-growth-factor=1');
}

/** V8's default growth of the young generation again (`--semi-space-growth-factor=2`). @internal */
export function letYoungGenerationsGrow(): void {
  v8.setFlagsFromString(`--semi-space-growth-factor=${DEFAULT_GROWTH}`);
}
