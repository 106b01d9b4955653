#!/usr/bin/env node
/**
 * `poise-bench` — the same command as `poise bench`, for an install of
 * @poise-lb/bench. Exit codes: the poise table (0 ok, 1 failure, 2 usage,
 * 4 no membership in the Redis cluster), 130 after Ctrl-C.
 */
import { runBenchCommand } from './command.js';

process.exitCode = await runBenchCommand(process.argv.slice(2));
