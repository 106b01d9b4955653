/**
 * The policy names `poise bench --policy` accepts — the runtime's own list,
 * so the flag can never drift from what a Router runs — and the set a run
 * compares by default.
 */
import type { PolicyName } from 'poise-lb/runtime';
import { KEYED_POLICY_NAMES, POLICY_NAMES as RUNTIME_POLICY_NAMES } from './kit.js';

/** Every policy a Router can run, in the runtime's documentation order. */
export const POLICY_NAMES: readonly PolicyName[] = RUNTIME_POLICY_NAMES;

/** A policy name accepted by `--policy`. */
export type BenchPolicyName = PolicyName;

/** The comparison a plain `poise bench` runs: static, random, load-aware and latency-aware. */
export const DEFAULT_POLICIES: readonly BenchPolicyName[] = [
  'round-robin',
  'random',
  'weighted',
  'least-loaded',
  'p2c:connections',
  'p2c:latency',
];

/** Keyed policies need an affinity key per request. */
export function isKeyed(policy: BenchPolicyName): boolean {
  return KEYED_POLICY_NAMES.includes(policy);
}
