/**
 * A Router's attachment and options, and their one reader: what each
 * option means, its default, and the check that names it in an
 * `InvalidConfig`.
 */
import { checkOptionKeys, invalidConfig } from '../core/errors.js';
import type { Seed } from '../core/rng.js';
import { integerIn } from '../core/validate.js';
import { LAYOUT_VERSION } from '../load/layout.js';
import { LeaseKind, type LeaseKindCode } from '../load/leases.js';
import { defaultLogger, type Logger } from '../log.js';
import { kindCode, type LeaseKindName } from './acquire-options.js';
import type { Clock } from './clock.js';
import { resolveEjection, type EjectionOptions, type ResolvedEjection } from './health.js';
import { policySetup, type PolicyName, type PolicySetup } from './policies.js';
import { checkLag, type ReadFallback } from './role-sets.js';
import { MAX_PUBLISH_WAIT_MS } from './publication-wait.js';
import { Metric } from './slot-candidate.js';

/** What a thread needs to attach a Router: structured-clonable; the buffer is shared, not copied. */
export interface RouterAttachment {
  /** The LoadTable's shared memory (counters, epochs and the spec blob). */
  buffer: SharedArrayBuffer;
  /** The table layout version the attachment was made for. */
  layoutVersion: number;
  /** The process's shared clock (ticked by the owner's ticker thread). */
  clock: SharedArrayBuffer;
}

/** Checks a {@link RouterAttachment} (throws `InvalidConfig` naming the bad field). */
export function checkAttachment(attachment: RouterAttachment): void {
  if (typeof attachment !== 'object' || attachment === null || !(attachment.buffer instanceof SharedArrayBuffer)) {
    invalidConfig('attachment.buffer', 'must be a SharedArrayBuffer (from balancer.attachment())', attachment?.buffer);
  }
  if (attachment.layoutVersion !== LAYOUT_VERSION) {
    invalidConfig(
      'attachment.layoutVersion',
      `must be ${LAYOUT_VERSION} (same poise-lb version in every thread)`,
      attachment.layoutVersion,
    );
  }
  if (!(attachment.clock instanceof SharedArrayBuffer)) {
    invalidConfig('attachment.clock', 'must be a SharedArrayBuffer (from balancer.attachment())', attachment.clock);
  }
}

/** Options of a Router. */
export interface RouterOptions {
  /** Default `'p2c:latency'`. */
  policy?: PolicyName;
  /**
   * `p2c:latency` only: the tail rule. When one of the two candidates' mean
   * latency (a plain EWMA beside the PeakEWMA) is more than `latencyRatio`
   * times the other's, the faster wins whatever their in-flight counts; within
   * the ratio the PeakEWMA cost decides. A number >= 1; default 2;
   * `Infinity` turns it off (Finagle's and tower's cost alone).
   * docs/policies.md, "The tail rule".
   */
  latencyRatio?: number;
  /** Replay seed (debug only); default: OS seed drawn in the router's own thread. */
  seed?: Seed;
  /** Passive health: consecutive failures → ejection with exponential backoff + jitter. */
  ejection?: EjectionOptions;
  /**
   * What a lease counts by default: `'connection'` (active connections, its
   * sample is a connect time) or `'request'` (in-flight requests, its sample
   * is a request latency). Default: `'connection'` for `p2c:connections` and
   * `p2c:connectionTime`, else `'request'`.
   */
  leaseKind?: LeaseKindName;
  /** Milliseconds; default the shared process clock. Inject one in tests (owner thread). Read modulo 2^30. */
  clock?: Clock;
  /** Default `defaultLogger()`. */
  logger?: Logger;
  /**
   * Longest one acquire waits, in all, for the owner to publish a change
   * whose tags it already saw, ms; default 5. Tests that must catch the
   * publication window on a loaded machine raise it.
   * @internal
   */
  publishWaitMs?: number;
  /** A read's default lag bound (`acquire({ intent: 'read' })`), ms; default 10 000. */
  maxLagMs?: number;
  /**
   * When no replica qualifies for a read: `'primary'` (default) reads from a
   * primary; `'refuse'` throws `PoiseError` `ReplicaLag`.
   */
  readFallback?: ReadFallback;
}

/** A Router's options, checked and with their defaults. @internal */
export interface ResolvedRouterOptions {
  policyName: PolicyName;
  setup: PolicySetup;
  ejection: ResolvedEjection;
  seed: Seed | undefined;
  clock: Clock | undefined;
  logger: Logger;
  publishWaitMs: number;
  maxLagMs: number;
  readFallback: ReadFallback;
  /** Whether the policy's metric is timed (its estimates decay with the clock). */
  timed: boolean;
  /** The lease kind a lease counts by default. */
  defaultKind: LeaseKindCode;
}

/** Checks `opts` (throws `InvalidConfig` naming the first bad option) and applies the defaults. @internal */
export function readRouterOptions(opts: RouterOptions): ResolvedRouterOptions {
  if (typeof opts !== 'object' || opts === null) invalidConfig('options', 'must be an object', opts);
  checkOptionKeys(opts, [
    'policy',
    'latencyRatio',
    'seed',
    'ejection',
    'leaseKind',
    'clock',
    'logger',
    'publishWaitMs',
    'maxLagMs',
    'readFallback',
  ]);
  const maxLagMs = checkLag(opts.maxLagMs ?? 10_000, 'options.maxLagMs');
  const readFallback = opts.readFallback ?? 'primary';
  if (readFallback !== 'primary' && readFallback !== 'refuse') {
    invalidConfig('options.readFallback', 'must be "primary" or "refuse"', readFallback);
  }
  const publishWaitMs = integerIn(opts.publishWaitMs ?? MAX_PUBLISH_WAIT_MS, 'options.publishWaitMs', 0, 10_000);
  const policyName = opts.policy ?? 'p2c:latency';
  const setup = policySetup(policyName, { latencyRatio: opts.latencyRatio });
  const ejection = resolveEjection(opts.ejection);
  if (opts.clock !== undefined && typeof opts.clock !== 'function')
    invalidConfig('options.clock', 'must be a function returning milliseconds', opts.clock);
  const metric = setup.metric;
  const connectionDefault = metric === Metric.ConnectTime || metric === Metric.Connections;
  const defaultKind =
    opts.leaseKind === undefined
      ? connectionDefault
        ? LeaseKind.Connection
        : LeaseKind.Request
      : kindCode(opts.leaseKind, 'options.leaseKind');
  return {
    policyName,
    setup,
    ejection,
    seed: opts.seed,
    clock: opts.clock,
    logger: opts.logger ?? defaultLogger(),
    publishWaitMs,
    maxLagMs,
    readFallback,
    timed: metric === Metric.ConnectTime || metric === Metric.Latency || metric === Metric.Probe,
    defaultKind,
  };
}
