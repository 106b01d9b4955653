/**
 * @poise-lb/bench — the `poise bench` command: the policies of poise-lb
 * compared under one closed-loop load on real loopback backends, one table,
 * an HTML report and the same data as JSON. `poise bench` (poise-lb's CLI)
 * loads this module; `poise-bench` runs it directly. Explicit named exports only.
 */
export { command, runBenchCommand, EXIT_INTERRUPTED } from './command.js';
export type { BenchResult, PolicyResult, BackendShare } from './results.js';
