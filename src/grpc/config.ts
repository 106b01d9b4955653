/**
 * The `poise` block of a gRPC service config,
 *
 *     { "loadBalancingConfig": [{ "poise": { "policy": "p2c:latency", ... } }] }
 *
 * validated into the options of one channel's load balancer. A block that
 * is not valid is not thrown at grpc-js (which would skip it and fall back
 * to `pick_first` without a word): it becomes a config that carries its
 * `PoiseError`, and the channel's resolution fails with a status naming the
 * field (balancer.ts). JSON only: every option is a string, number or plain
 * object.
 * @internal
 */
import { PoiseError, checkOptionKeys, invalidConfig } from '../core/errors.js';
import { integerIn, numberIn, positiveNumber } from '../core/validate.js';
import { POLICY_NAMES, type PolicyName } from '../runtime/policies.js';
import { resolveRetryBudget, type RetryBudgetOptions } from '../runtime/retry-budget.js';

/** How a call's end counts for its backend (a lease's outcome). */
export type CallOutcome = 'success' | 'failure' | 'overload' | 'cancelled';

/** The `poise` load-balancing config, as written in the service config (JSON). */
export interface PoiseLbConfig {
  /** The cluster registered with `registerPoiseCluster`; default the one the `poise:` target names. */
  cluster?: string;
  /** Any poise policy; default `'p2c:latency'`. */
  policy?: PolicyName;
  /** `p2c:latency`'s tail rule (RouterOptions.latencyRatio). */
  latencyRatio?: number;
  /** Metadata key whose value is the call's affinity key (keyed policies: rendezvous, maglev, ring-hash). */
  keyMetadata?: string;
  /** Metadata key whose value is the call's failover priority (an integer >= 0). */
  priorityMetadata?: string;
  /** Metadata key whose value is the call's admission band (a number, one of the cluster's `admission.bands`); without it, the gate's default band. */
  bandMetadata?: string;
  /** Longest wait for admission, ms; default the gate's `timeoutMs`. */
  admissionTimeoutMs?: number;
  /** Outcome by status name (`"UNAVAILABLE": "failure"`), over the defaults. */
  statusOutcomes?: Record<string, CallOutcome>;
  /** A call that ran longer than this (a stream) releases its lease without a latency sample, ms; default 10 000. */
  maxLatencySampleMs?: number;
  /** Retries (grpc-js's retry policy) allowed on top of calls; default the Balancer's shared budget when it has one, else 20 %, 10/s, 10 s. */
  retryBudget?: RetryBudgetOptions;
  /** How long a picked call may wait for its start (call credentials) before its lease is given back, ms; default 1 000. */
  startGraceMs?: number;
}

/** grpc status codes by name (grpc-js's `status` enum, repeated so that this file loads no package). */
export const STATUS_CODES: Readonly<Record<string, number>> = Object.freeze({
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  PERMISSION_DENIED: 7,
  RESOURCE_EXHAUSTED: 8,
  FAILED_PRECONDITION: 9,
  ABORTED: 10,
  OUT_OF_RANGE: 11,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
  DATA_LOSS: 15,
  UNAUTHENTICATED: 16,
});

/**
 * The default outcome of each status: `UNAVAILABLE` a failure (passive
 * health and outlier detection see it), `RESOURCE_EXHAUSTED` an overload,
 * `CANCELLED` and `DEADLINE_EXCEEDED` cancelled (the caller's choice, never
 * the backend's fault), every other one — the application's own errors — a
 * success.
 */
export function defaultOutcomes(): CallOutcome[] {
  const out: CallOutcome[] = new Array<CallOutcome>(17).fill('success');
  out[STATUS_CODES['UNAVAILABLE']!] = 'failure';
  out[STATUS_CODES['RESOURCE_EXHAUSTED']!] = 'overload';
  out[STATUS_CODES['CANCELLED']!] = 'cancelled';
  out[STATUS_CODES['DEADLINE_EXCEEDED']!] = 'cancelled';
  return out;
}

/** A validated block. @internal */
export interface ResolvedLbConfig {
  readonly cluster: string | undefined;
  readonly policy: PolicyName;
  readonly latencyRatio: number | undefined;
  readonly keyMetadata: string | undefined;
  readonly priorityMetadata: string | undefined;
  readonly bandMetadata: string | undefined;
  readonly admissionTimeoutMs: number | undefined;
  /** By status code (0..16): the outcome. */
  readonly outcomes: readonly CallOutcome[];
  readonly maxLatencySampleMs: number;
  readonly retryBudget: RetryBudgetOptions | undefined;
  readonly startGraceMs: number;
  /** The block as given (grpc-js's `toJsonObject`). */
  readonly raw: unknown;
}

const FIELD = 'loadBalancingConfig.poise';
const KEYS = [
  'cluster',
  'policy',
  'latencyRatio',
  'keyMetadata',
  'priorityMetadata',
  'bandMetadata',
  'admissionTimeoutMs',
  'statusOutcomes',
  'maxLatencySampleMs',
  'retryBudget',
  'startGraceMs',
];
const OUTCOMES: readonly string[] = ['success', 'failure', 'overload', 'cancelled'];

function metadataKey(value: unknown, field: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string' || !/^[0-9a-z_.-]+$/.test(value) || value.endsWith('-bin') || value.startsWith('grpc-'))
    invalidConfig(field, 'must be a lower-case ASCII metadata key (not -bin, not grpc-)', value);
  return value;
}

/** Validates a `poise` block; throws `InvalidConfig` naming `loadBalancingConfig.poise.<field>`. @internal */
export function resolveLbConfig(raw: unknown): ResolvedLbConfig {
  const value = raw ?? {};
  if (typeof value !== 'object' || Array.isArray(value)) invalidConfig(FIELD, 'must be an object', value);
  checkOptionKeys(value, KEYS, FIELD);
  const o = value as PoiseLbConfig;
  if (o.cluster !== undefined && (typeof o.cluster !== 'string' || o.cluster === ''))
    invalidConfig(`${FIELD}.cluster`, 'must be a non-empty string', o.cluster);
  const policy = o.policy ?? 'p2c:latency';
  if (!POLICY_NAMES.includes(policy)) invalidConfig(`${FIELD}.policy`, `must be one of ${POLICY_NAMES.join(', ')}`, policy);
  let latencyRatio: number | undefined;
  if (o.latencyRatio !== undefined) {
    if (policy !== 'p2c:latency') invalidConfig(`${FIELD}.latencyRatio`, 'applies to p2c:latency only', o.latencyRatio);
    latencyRatio = numberIn(o.latencyRatio, `${FIELD}.latencyRatio`, 1, Number.MAX_VALUE);
  }
  const outcomes = defaultOutcomes();
  if (o.statusOutcomes !== undefined) {
    const so = o.statusOutcomes;
    if (typeof so !== 'object' || so === null || Array.isArray(so)) invalidConfig(`${FIELD}.statusOutcomes`, 'must be an object', so);
    for (const [name, outcome] of Object.entries(so)) {
      const code = STATUS_CODES[name];
      if (code === undefined || !Object.hasOwn(STATUS_CODES, name))
        invalidConfig(`${FIELD}.statusOutcomes.${name}`, 'is not a gRPC status name (UNAVAILABLE, INTERNAL, ...)');
      if (!OUTCOMES.includes(outcome as string))
        invalidConfig(`${FIELD}.statusOutcomes.${name}`, 'must be "success", "failure", "overload" or "cancelled"', outcome);
      outcomes[code] = outcome;
    }
  }
  if (o.retryBudget !== undefined) resolveRetryBudget(o.retryBudget, `${FIELD}.retryBudget`);
  return {
    cluster: o.cluster,
    policy,
    latencyRatio,
    keyMetadata: metadataKey(o.keyMetadata, `${FIELD}.keyMetadata`),
    priorityMetadata: metadataKey(o.priorityMetadata, `${FIELD}.priorityMetadata`),
    bandMetadata: metadataKey(o.bandMetadata, `${FIELD}.bandMetadata`),
    admissionTimeoutMs:
      o.admissionTimeoutMs === undefined ? undefined : positiveNumber(o.admissionTimeoutMs, `${FIELD}.admissionTimeoutMs`),
    outcomes,
    maxLatencySampleMs: positiveNumber(o.maxLatencySampleMs ?? 10_000, `${FIELD}.maxLatencySampleMs`),
    retryBudget: o.retryBudget,
    startGraceMs: integerIn(o.startGraceMs ?? 1000, `${FIELD}.startGraceMs`, 1, 600_000),
    raw: value,
  };
}

/** The block's error, or undefined when it is valid. @internal */
export function lbConfigProblem(raw: unknown): PoiseError | undefined {
  try {
    resolveLbConfig(raw);
    return undefined;
  } catch (err) {
    if (err instanceof PoiseError) return err;
    throw err;
  }
}
