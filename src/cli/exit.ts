/**
 * The one table from failures to exit codes, used by every `poise`
 * subcommand. An exit code comes from the error's class or `PoiseError`
 * code — never from its message — so scripts may branch on it.
 */
import { isPoiseError, type PoiseErrorCode } from '../core/errors.js';
import { UsageError } from './usage.js';

/** Exit codes of every `poise` command (stable; documented in docs/cli.md and `--help`). */
export const EXIT = {
  /** Success. */
  ok: 0,
  /** Runtime failure: Redis or a file unreachable (`Unavailable`), cannot listen, any unexpected error. */
  failure: 1,
  /** Usage error: unknown, missing or malformed flag, a flag value out of its range. */
  usage: 2,
  /** Rejected by validation: a document, backend or value failed validation; nothing was written or applied. */
  rejected: 3,
  /** Not found: no such backend, nothing stored for the cluster, no such file. */
  notFound: 4,
  /** Conflict: a version conflict (`--if-version`, a version not newer), write contention that exhausted its retries, a second source. */
  conflict: 5,
  /** Capacity exhausted: the version space (2^53 − 1), more backends than `--capacity`. */
  capacity: 6,
  /** Corrupt stored data: the stored snapshot (or a last-known file) is not a valid snapshot; a read failure, not a rejected write. */
  corrupt: 7,
  /** Written on the Redis master but acknowledged by fewer replicas than `--wait-replicas` in time: stored, and a failover before it replicates can lose it. */
  notReplicated: 8,
} as const;

/** Every PoiseError code → its exit code. A Record, so a new code does not compile until it is placed here. */
const BY_CODE: Record<PoiseErrorCode, number> = {
  InvalidConfig: EXIT.rejected,
  InvalidWeight: EXIT.rejected,
  DuplicateIdentity: EXIT.rejected,
  InconsistentTopology: EXIT.rejected,
  WeightOverflow: EXIT.rejected,
  NotFound: EXIT.notFound,
  Conflict: EXIT.conflict,
  CapacityExhausted: EXIT.capacity,
  Corrupt: EXIT.corrupt,
  NotReplicated: EXIT.notReplicated,
  Unavailable: EXIT.failure,
  Closed: EXIT.failure,
  Overloaded: EXIT.failure,
  Empty: EXIT.failure,
  NoEligibleCandidates: EXIT.failure,
  PanicRejected: EXIT.failure,
  QueueFull: EXIT.failure,
  QueueTimeout: EXIT.failure,
  Cancelled: EXIT.failure,
  ReplicaLag: EXIT.failure,
  NotReady: EXIT.failure,
  ConnectTimeout: EXIT.failure,
  LocalResource: EXIT.failure,
};

/** The exit code for `err`: 2 for a {@link UsageError}, the code's row for a `PoiseError`, else 1. */
export function exitCodeOf(err: unknown): number {
  if (err instanceof UsageError) return EXIT.usage;
  // A PoiseError of another copy of the package may carry a code this copy does not know: a runtime failure.
  if (isPoiseError(err)) return BY_CODE[err.code] ?? EXIT.failure;
  return EXIT.failure;
}

/** The exit-code table for `--help` texts. */
export const EXIT_HELP = `exit codes: 0 ok, 1 runtime failure (Redis or a file unavailable, cannot listen), 2 usage error,
            3 rejected by validation (nothing written or applied), 4 not found, 5 conflict,
            6 capacity exhausted (version ceiling, more backends than --capacity), 7 stored snapshot corrupt,
            8 written but not acknowledged by --wait-replicas replicas in time`;

/**
 * Reports a failure of `poise <command>` on stderr — the message, the
 * `--help` hint for a usage error, the stack of an unexpected one — and
 * returns its exit code.
 */
export function reportFailure(command: string, err: unknown): number {
  const code = exitCodeOf(err);
  process.stderr.write(
    `poise ${command}: ${err instanceof Error ? err.message : String(err)}\n${code === EXIT.usage ? `Run \`poise ${command} --help\` for the flags.\n` : ''}`,
  );
  if (!isPoiseError(err) && !(err instanceof UsageError) && err instanceof Error && err.stack !== undefined)
    process.stderr.write(`${err.stack}\n`);
  return code;
}
