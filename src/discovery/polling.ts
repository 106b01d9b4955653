/**
 * The loop every DNS-style discovery source runs: query, turn the answer
 * into backends, deliver a snapshot when the backends changed, wait for the
 * answer's TTL (clamped to a floor and a ceiling), query again. A query
 * that fails, or answers nothing usable, never empties a working
 * membership: the last good one stays in force, the next query comes after
 * a jittered, capped exponential backoff, and the failure is logged once
 * per change of state (ok → stale, or another kind of error), not once per
 * query. The source's {@link DiscoveryStatus} says the same for metrics.
 *
 * Versions: each delivered snapshot is the previous + 1 (the first is 1),
 * under a lineage of this source instance's own, so a Balancer fed by a
 * new instance (a restarted source) takes its version 1.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from 'pino';
import { Backoff } from '../core/backoff.js';
import { PoiseError, checkOptionKeys, invalidConfig, isPoiseError } from '../core/errors.js';
import { resolveBackendSpecs, type BackendSpec, type MembershipSnapshot } from '../core/spec.js';
import { compactSpec } from '../core/spec-fields.js';
import { timersOption, type TimerSource } from '../core/timers.js';
import { integerIn } from '../core/validate.js';
import { defaultLogger } from '../log.js';
import { reportDelivery, type MembershipSource, type SnapshotListener } from '../membership/source.js';
import { newDiscoveryStatus, type DiscoveryErrorKind, type DiscoveryStatus, type DiscoveryStatusHolder } from './status.js';

/** The shortest wait between two queries of a good answer, ms (a TTL of 0 is re-asked after this). */
export const DEFAULT_MIN_INTERVAL_MS = 1_000;
/** The longest wait between two queries of a good answer, ms (a day-long TTL is re-asked after this). */
export const DEFAULT_MAX_INTERVAL_MS = 300_000;
/** The retry backoff after a failed query: uniform in [1 s, min(30 s, 1 s · 2^(n+1))). */
export const DEFAULT_RETRY = Object.freeze({ baseMs: 1_000, maxMs: 30_000 });

/** Options every polling discovery source takes. */
export interface PollingOptions {
  /** Shortest wait between queries while answers are good, ms; default 1000. */
  minIntervalMs?: number;
  /** Longest wait between queries while answers are good, ms; default 300000 (5 min). */
  maxIntervalMs?: number;
  /** Backoff after a failed query: `{ baseMs, maxMs }`; default 1 s to 30 s. */
  retry?: { baseMs: number; maxMs: number };
  /**
   * What start() does when the first query fails: `'reject'` (default)
   * rejects with the `PoiseError`; `'wait'` resolves, keeps querying, and
   * delivers the first good answer (reporting the failure as `problem` meanwhile).
   */
  initial?: 'reject' | 'wait';
  /** The clock and timers of the re-query schedule; default the process's. */
  timers?: TimerSource;
  /** Wall-clock ms for the status's `lastSuccessMs`; default `Date.now`. */
  wallClock?: () => number;
  /** pino logger; default {@link defaultLogger}. */
  logger?: Logger;
}

/** The option names of {@link PollingOptions}. @internal */
export const POLLING_OPTION_KEYS = ['minIntervalMs', 'maxIntervalMs', 'retry', 'initial', 'timers', 'wallClock', 'logger'] as const;

/** One good answer: the backends and how long it may be trusted. @internal */
export interface Answer {
  readonly backends: readonly BackendSpec[];
  /** The answer's smallest TTL, seconds. */
  readonly ttlSeconds: number;
}

/** A failed query: its kind (the metrics label) and the error to report. @internal */
export class QueryError extends Error {
  readonly kind: DiscoveryErrorKind;
  constructor(kind: DiscoveryErrorKind, message: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.kind = kind;
  }
}

/**
 * A discovery source that polls: subclasses say how to ask (`query`), this
 * class when, and what a failure leaves in force. @internal
 */
export abstract class PollingSource implements MembershipSource, DiscoveryStatusHolder {
  readonly status: DiscoveryStatus;
  readonly description: string;
  protected readonly log: Logger;
  readonly #timers: TimerSource;
  readonly #wall: () => number;
  readonly #min: number;
  readonly #max: number;
  readonly #backoff: Backoff;
  readonly #initial: 'reject' | 'wait';
  readonly #lineage = randomUUID();
  #listener: SnapshotListener | undefined;
  #version = 0;
  #failures = 0;
  #timer: unknown;
  #closed = false;
  /** The delivered backends, as compact JSON (what a new answer is compared with). */
  #inForce: string | undefined;
  /** The last reported failure (kind and message): a repeat is not logged again. */
  #reported: string | undefined;
  #problem: PoiseError | undefined;

  /** `description`: the source as written (`dns:api.internal:8080`); `field`: the options' name in messages. */
  constructor(description: string, opts: PollingOptions, field: string) {
    this.description = description;
    this.status = newDiscoveryStatus(description);
    this.log = (opts.logger ?? defaultLogger()).child({ source: description });
    this.#timers = timersOption(opts.timers, `${field}.timers`);
    if (opts.wallClock !== undefined && typeof opts.wallClock !== 'function')
      invalidConfig(`${field}.wallClock`, 'must be a function returning milliseconds', opts.wallClock);
    this.#wall = opts.wallClock ?? Date.now;
    this.#min = integerIn(opts.minIntervalMs ?? DEFAULT_MIN_INTERVAL_MS, `${field}.minIntervalMs`, 1, 86_400_000);
    this.#max = integerIn(opts.maxIntervalMs ?? DEFAULT_MAX_INTERVAL_MS, `${field}.maxIntervalMs`, this.#min, 86_400_000);
    if (opts.retry !== undefined) checkOptionKeys(opts.retry, ['baseMs', 'maxMs'], `${field}.retry`);
    this.#backoff = new Backoff(opts.retry ?? DEFAULT_RETRY, undefined, `${field}.retry`);
    if (opts.initial !== undefined && opts.initial !== 'reject' && opts.initial !== 'wait')
      invalidConfig(`${field}.initial`, 'must be "reject" or "wait"', opts.initial);
    this.#initial = opts.initial ?? 'reject';
  }

  /** Asks once: a good answer, or throws a {@link QueryError}. */
  protected abstract query(): Promise<Answer>;

  /** Cancels a query in flight (close()). */
  protected abstract cancel(): void;

  get version(): number {
    return this.#version;
  }

  get problem(): PoiseError | undefined {
    return this.#problem;
  }

  async start(listener: SnapshotListener): Promise<void> {
    if (this.#listener !== undefined) throw new PoiseError('Conflict', `${this.description}: already started`);
    this.#listener = listener;
    const ok = await this.#round();
    if (!ok && this.#initial === 'reject' && this.#problem !== undefined) {
      await this.close();
      throw this.#problem;
    }
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    if (this.#timer !== undefined) this.#timers.clearTimeout(this.#timer);
    this.#timer = undefined;
    this.cancel();
  }

  /** One query and its consequences; schedules the next. Whether the answer was good. */
  async #round(): Promise<boolean> {
    this.#timer = undefined;
    let answer: Answer;
    try {
      answer = await this.query();
      if (answer.backends.length === 0) throw new QueryError('empty', 'the answer holds no record');
      resolveBackendSpecs(answer.backends, `${this.description} backends`);
    } catch (err) {
      if (this.#closed) return false;
      this.#failed(err);
      return false;
    }
    if (this.#closed) return false;
    this.#succeeded(answer);
    return true;
  }

  #schedule(ms: number): void {
    if (this.#closed) return;
    this.#timer = this.#timers.setTimeout(() => void this.#round(), ms);
  }

  #succeeded(answer: Answer): void {
    const json = JSON.stringify(answer.backends.map((b) => compactSpec(resolveBackendSpecs([b])[0]!)));
    let delivered = true;
    if (json !== this.#inForce) {
      const snapshot: MembershipSnapshot = { version: this.#version + 1, lineage: this.#lineage, backends: answer.backends };
      try {
        delivered = reportDelivery(this.log, this.#listener!(snapshot), snapshot);
        this.#version = snapshot.version;
        this.#inForce = json;
      } catch (err) {
        // The target refused it (a listener that throws): the last good stays; ask again after the backoff.
        this.#failed(new QueryError('malformed', `the target refused the answer: ${(err as Error).message}`, err));
        return;
      }
    }
    const s = this.status;
    if (this.#reported !== undefined || s.state !== 'ok') {
      if (this.#reported !== undefined) this.log.info({ backends: answer.backends.length }, 'discovery answers again');
      this.#reported = undefined;
    }
    this.#problem = undefined;
    this.#failures = 0;
    s.state = 'ok';
    s.lastSuccessMs = this.#wall();
    if (delivered) s.records = answer.backends.length;
    this.#schedule(Math.min(this.#max, Math.max(this.#min, answer.ttlSeconds * 1000)));
  }

  #failed(err: unknown): void {
    const kind = err instanceof QueryError ? err.kind : isPoiseError(err) ? 'malformed' : 'other';
    const message = err instanceof Error ? err.message : String(err);
    const s = this.status;
    s.errors[kind]++;
    s.state = this.#inForce === undefined ? 'failing' : 'stale';
    this.#problem = new PoiseError('Unavailable', `${this.description}: ${message}`, { cause: err });
    const key = `${kind} ${message}`;
    if (key !== this.#reported) {
      this.#reported = key;
      this.log.warn(
        { kind, err: message, inForce: this.#inForce === undefined ? 0 : s.records },
        this.#inForce === undefined
          ? 'discovery failed; no membership from this source yet'
          : 'discovery failed; the last good membership stays in force',
      );
    }
    this.#schedule(this.#backoff.delayMs(this.#failures++));
  }
}
