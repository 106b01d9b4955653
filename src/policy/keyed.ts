/**
 * Helpers shared by the keyed policies (Rendezvous, Maglev): hash-seed option
 * validation and key hashing.
 *
 * Keyed policies hash with {@link DEFAULT_HASH_SEED} unless told otherwise, on
 * purpose: every worker, process and restart that uses the same seed maps a
 * key to the same backend. (Stochastic policies never use that constant.)
 */
import { invalidConfig } from '../core/errors.js';
import { DEFAULT_HASH_SEED, hash53, hash53Mod, toHashSeed, type HashSeed } from '../core/hash.js';
import type { SeedOptions } from './types.js';

/** Options of the keyed policies. `seed` is accepted for a uniform interface and unused: they draw no randomness. */
export interface KeyedOptions extends SeedOptions {
  /** The 64-bit hash seed; default {@link DEFAULT_HASH_SEED}. Instances agree on keys only with equal seeds. */
  hashSeed?: bigint;
}

/** Validates `options.hashSeed` (a bigint, or a safe integer) and prepares it. @internal */
export function resolveHashSeed(value: unknown): HashSeed {
  if (value === undefined) return toHashSeed(DEFAULT_HASH_SEED);
  if (typeof value === 'bigint' || (typeof value === 'number' && Number.isSafeInteger(value))) return toHashSeed(value);
  return invalidConfig('options.hashSeed', 'must be a bigint or a safe integer', value);
}

/** The 53-bit hash of a pick's key; `InvalidConfig` unless it is a string or a finite number. @internal */
export function keyHash(key: unknown, seed: HashSeed): number {
  if (typeof key === 'string' || (typeof key === 'number' && Number.isFinite(key))) return hash53(key, seed);
  return invalidConfig('context.key', 'must be a string or a finite number', key);
}

/** `keyHash(key, seed) % m` (m in [1, 2^31)), returning only the small remainder: allocation-free even when not inlined. @internal */
export function keySlot(key: unknown, seed: HashSeed, m: number): number {
  if (typeof key === 'string' || (typeof key === 'number' && Number.isFinite(key))) return hash53Mod(key, seed, m);
  return invalidConfig('context.key', 'must be a string or a finite number', key);
}
