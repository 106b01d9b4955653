/**
 * `poise bench` (and `poise-bench`) — the command `npm start` runs: K TCP backends on loopback,
 * W worker threads each with its own Router over one shared LoadTable, the
 * default policies compared under the same closed-loop load, one table,
 * an HTML report and the same data as JSON. See `poise bench --help`.
 */
import { readFileSync } from 'node:fs';
import { writeFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import path from 'node:path';
import { formatBalls } from './balls.js';
import { EXIT, exitCodeOf, type Command } from './kit.js';
import { benchHelp, parseBenchFlags, type BenchFlags } from './flags.js';
import { Progress } from './progress.js';
import { renderReport } from './report-html.js';
import { formatRecommendation, formatTable, recommend, type BenchResult } from './results.js';
import { runBench, type RunContext } from './run.js';

/** Exit code after Ctrl-C (128 + SIGINT). */
export const EXIT_INTERRUPTED = 130;

/** The version of the poise-lb being measured (the results record it). */
function libraryVersion(): string {
  try {
    const file = createRequire(import.meta.url).resolve('poise-lb/package.json');
    return (JSON.parse(readFileSync(file, 'utf8')) as { version?: string }).version ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

/** Prints the results and writes the report and the JSON. */
async function publish(result: BenchResult, flags: BenchFlags, out: NodeJS.WritableStream): Promise<void> {
  const c = result.config;
  out.write(`\npoise bench — ${c.scenario}: ${c.description}\n`);
  if (c.scenario !== 'balls') {
    out.write(
      `${c.workers} workers × ${c.concurrency} concurrent requests, ${c.durationS} s per policy (after ${c.warmupS} s warm-up), ${c.connection} connections, seed ${c.seed ?? 'OS'}\n\n`,
    );
    out.write(`${result.policies.length > 0 ? formatTable(result.policies) : '(nothing measured)'}\n`);
  }
  if (result.balls !== null) out.write(`\n${formatBalls(result.balls)}\n`);
  // Last, so it is what the reader sees when the run ends: which policy this run points to, and why.
  if (c.scenario !== 'balls') out.write(`\n${formatRecommendation(recommend(result.policies, result.balls))}\n`);
  if (result.interrupted) out.write('\nInterrupted: the figures above cover what was measured before Ctrl-C.\n');
  await writeFile(flags.json, `${JSON.stringify({ ...result, recommendation: recommend(result.policies, result.balls) }, null, 2)}\n`);
  await writeFile(flags.report, renderReport(result));
  out.write(`\nreport: ${path.resolve(flags.report)}\njson:   ${path.resolve(flags.json)}\n`);
}

/**
 * Runs `poise bench` with `argv`; resolves to the exit code: 0, 130 after
 * Ctrl-C, otherwise the code of the failure from the one table (exit.ts):
 * 2 for a bad flag, 4 when the Redis cluster has no membership, 1 for a
 * runtime failure. `workerFile` overrides the compiled worker module.
 */
export async function runBenchCommand(argv: string[], opts: { workerFile?: URL } = {}): Promise<number> {
  try {
    return await runChecked(argv, opts);
  } catch (err) {
    const code = exitCodeOf(err);
    process.stderr.write(
      `poise bench: ${err instanceof Error ? err.message : String(err)}\n${code === EXIT.usage ? 'Run `poise bench --help` for the flags.\n' : ''}`,
    );
    return code;
  }
}

async function runChecked(argv: string[], opts: { workerFile?: URL }): Promise<number> {
  const flags: BenchFlags = parseBenchFlags(argv);
  if (flags.help) {
    process.stdout.write(`${benchHelp()}\n`);
    return EXIT.ok;
  }
  // The run's output is the table; routers' warnings (ejections) are summed in
  // its errors column. POISE_LOG_LEVEL still wins when set (workers inherit it).
  process.env['POISE_LOG_LEVEL'] ??= 'error';
  const abort = new AbortController();
  const onSigint = (): void => {
    if (abort.signal.aborted) process.exit(EXIT_INTERRUPTED); // second Ctrl-C: leave now
    process.stderr.write('\nStopping (Ctrl-C again to quit at once)…\n');
    abort.abort();
  };
  process.on('SIGINT', onSigint);
  try {
    const ctx: RunContext = { progress: new Progress(process.stdout), signal: abort.signal, version: libraryVersion() };
    if (opts.workerFile !== undefined) ctx.workerFile = opts.workerFile;
    const result = await runBench(flags, ctx);
    await publish(result, flags, process.stdout);
    return result.interrupted ? EXIT_INTERRUPTED : EXIT.ok;
  } finally {
    process.off('SIGINT', onSigint);
  }
}

/** The `bench` subcommand. */
export const command: Command = {
  summary: 'compare balancing policies under load on local TCP backends; writes an HTML report (npm start)',
  run: (argv) => runBenchCommand(argv),
};
