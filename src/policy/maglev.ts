/**
 * Maglev: consistent hashing through a prime-sized lookup table, O(1) per pick.
 *
 * Table construction (Eisenbud et al., "Maglev", NSDI 2016, with Sōzu's
 * weighting), done when a slice is prepared — a different array or length —
 * and never inside a pick:
 * - M is prime (default 65537; a requested size is rounded up to a prime), so
 *   every `skip` in [1, M − 1] walks all M slots.
 * - Each member's `offset` and `skip` come from two differently-tagged mixes
 *   of its id's hash, so its preference list `offset, offset + skip, ...`
 *   (mod M) depends on nothing but its id and the hash seed.
 * - Member i may claim `⌊wᵢ·M / Σw⌋` slots; the leftover slots (fewer than n)
 *   go one each to members in id order. Members then take turns, in id order,
 *   claiming the next free slot of their preference list until the table is
 *   full. Id order (not slice order) makes the table identical for every
 *   instance holding the same members, however it ordered them.
 *
 * A pick reads `table[hash(key) mod M]`, where the key hash is the 32-bit
 * MurmurHash3 of the key's UTF-16 units with the fleet-wide seed
 * (`murmur3Key`; until 0.2 it was the 64-bit FNV-1a, see CHANGELOG.md). If
 * that member is ineligible
 * (health changed and the caller did not prepare a new slice, or a
 * standalone caller), the following slots are probed until an eligible owner
 * is found — no rebuild; its keys spread over the other members' slots.
 *
 * Disruption: removing one of N equal members reassigns its ≈M/N slots and
 * disturbs only a few others, so close to 1/N of keys move. Lookups stay
 * within a few percent of each member's share when M ≫ n (the paper suggests
 * M > 100·n); with M < n some members own no slot at all.
 *
 * Bounded loads (`balanceFactor`, `maglev:bounded` in the runtime): the
 * owner takes the key unless its load would pass ⌈c × (total + 1) / n⌉;
 * then the next slots' owners are tried in table order (see
 * {@link BoundedLoadOptions}).
 *
 * Without `context.key` it falls back to round robin, as Sōzu does.
 */
import type { Candidate } from '../core/candidate.js';
import { checkOptionKeys } from '../core/errors.js';
import { hash53, mix53, type HashSeed } from '../core/hash.js';
import { checkedAdd, mulDivFloor, validateWeight } from '../core/weight.js';
import { seed32Of } from '../core/hash.js';
import {
  BOUNDED_KEYS,
  keyHash32,
  resolveHashSeed,
  Successors,
  KeyedSlicePolicy,
  type BoundedLoadOptions,
  type KeyedOptions,
} from './keyed.js';
import { EligibleIndices } from './slice.js';
import type { PickContext } from './types.js';
import { integerIn } from '../core/validate.js';

/** The default table size (Sōzu's and the Maglev paper's), a prime. */
export const MAGLEV_DEFAULT_TABLE_SIZE = 65537;
/** The largest accepted requested table size. @internal */
export const MAGLEV_MAX_TABLE_SIZE = 1 << 24;

const OFFSET_TAG = 0x0ff5e7;
const SKIP_TAG = 0x5c1b;
/** Probes before checking whether any member is eligible at all. */
const QUICK_PROBES = 32;

/** Options of {@link Maglev}. */
export interface MaglevOptions extends KeyedOptions, BoundedLoadOptions {
  /** Requested table size M, an integer in [1, 2^24], rounded up to a prime; default 65537. */
  tableSize?: number;
}

/** The smallest prime >= n (n >= 1). @internal */
export function nextPrime(n: number): number {
  let p = Math.max(2, n);
  for (;;) {
    let prime = p === 2 || p % 2 === 1;
    for (let d = 3; prime && d * d <= p; d += 2) if (p % d === 0) prime = false;
    if (prime) return p;
    p++;
  }
}

/**
 * Maglev consistent hashing.
 *
 * @example
 * const maglev = new Maglev({ tableSize: 1009 });
 * const i = maglev.pick(backends, { key: clientIp });
 */
export class Maglev extends KeyedSlicePolicy {
  /** The table size actually used: the requested size rounded up to a prime. */
  readonly tableSize: number;
  private readonly seed: HashSeed;
  private readonly seed32: number;
  private readonly successors: Successors;
  private readonly eligible = new EligibleIndices();
  private table = new Int32Array(0);
  /**
   * The previous-but-one table, reused by the next prepare: tables are
   * double-buffered (256 KiB each at M = 65537), so a membership change
   * allocates no large object for GC to collect. Never read by a pick.
   */
  private spare = new Int32Array(0);
  /** The fill's occupancy bitset, reused (cleared) by every prepare. */
  private taken = new Int32Array(0);

  /** Throws `InvalidConfig` naming the option for a bad `tableSize` or `hashSeed`. */
  constructor(options: MaglevOptions = {}) {
    super();
    // `seed` is accepted like every policy's, and means nothing here: keyed policies draw no random numbers.
    checkOptionKeys(options, ['hashSeed', 'tableSize', 'seed', ...BOUNDED_KEYS]);
    const { tableSize = MAGLEV_DEFAULT_TABLE_SIZE } = options;
    this.tableSize = nextPrime(integerIn(tableSize, 'options.tableSize', 1, MAGLEV_MAX_TABLE_SIZE));
    this.seed = resolveHashSeed(options.hashSeed);
    this.seed32 = seed32Of(this.seed);
    this.successors = new Successors(options);
  }

  /** Builds the lookup table for `candidates` (throws `InvalidWeight` / `WeightOverflow`; the old table stays then). */
  prepare(candidates: readonly Candidate[]): void {
    const n = candidates.length;
    const m = this.tableSize;
    // The spare buffer is never the live table, so a prepare that throws
    // below leaves the table in force untouched.
    const table = this.spare.length === m ? this.spare : new Int32Array(m);
    table.fill(-1);
    if (n > 0) {
      let total = 0;
      for (let i = 0; i < n; i++) total = checkedAdd(total, validateWeight(candidates[i]!.weight, `candidates[${i}].weight`));
      const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => compareIds(candidates[a]!.id, candidates[b]!.id));
      // pos and skip are below m <= 2^24 + a few, so they are int32 and
      // `slot + skip` stays below 2^25: the walk needs no floating-point `%`
      // (one conditional subtraction per step), which takes the 65537-slot
      // fill from tens of milliseconds to about one.
      const pos = new Int32Array(n);
      const skip = new Int32Array(n);
      const target = new Float64Array(n);
      let assigned = 0;
      for (const i of order) {
        const h = hash53(candidates[i]!.id, this.seed);
        pos[i] = mix53(h, OFFSET_TAG) % m;
        skip[i] = m === 2 ? 1 : (mix53(h, SKIP_TAG) % (m - 1)) + 1;
        // ⌊w·M/Σw⌋ exactly, even where w·M passes 2^53.
        target[i] = mulDivFloor(candidates[i]!.weight, m, total);
        assigned += target[i]!;
      }
      for (let k = 0; assigned < m; k++, assigned++) target[order[k]!]!++;
      // Members in id order, as int32 (the walk's hot loop reads only typed arrays).
      const ids = Int32Array.from(order);
      const left = new Int32Array(n);
      for (let i = 0; i < n; i++) left[i] = target[i]!;
      const words = (m + 31) >>> 5;
      if (this.taken.length !== words) this.taken = new Int32Array(words);
      else this.taken.fill(0);
      fill(table, this.taken, ids, pos, skip, left, m);
    }
    this.eligible.reserve(n);
    this.successors.prepare(candidates);
    this.spare = this.table;
    this.table = table;
    this.slice = candidates;
    this.sliceLength = n;
  }

  /** The table's owner of `context.key`, probing past ineligible owners; `Empty` / `NoEligibleCandidates` when none. */
  pick(candidates: readonly Candidate[], context?: PickContext): number {
    const key = this.keyOf(candidates, context);
    if (key === undefined) return this.fallback.pick(candidates);
    const slot = (keyHash32(key, this.seed32) >>> 0) % this.tableSize;
    if (this.successors.factor > 0) return this.successors.pick(candidates, this.table, 1, this.tableSize, slot);
    const i = this.table[slot]!;
    if (candidates[i]!.isEligible()) return i;
    return this.probe(candidates, slot, key);
  }

  /** Slow path: the next slots in order, then (if no eligible member owns a slot) the eligible list. */
  private probe(candidates: readonly Candidate[], slot: number, key: string | number): number {
    const m = this.tableSize;
    const table = this.table;
    for (let p = 1; p < m; p++) {
      if (p === QUICK_PROBES) this.eligible.collect(candidates); // throws NoEligibleCandidates before a long walk
      const i = table[(slot + p) % m]!;
      if (candidates[i]!.isEligible()) return i;
    }
    const count = this.eligible.collect(candidates);
    return this.eligible.at((keyHash32(key, this.seed32) >>> 0) % count);
  }
}

/**
 * Members take turns (in `ids` order) claiming the next free slot of their
 * preference list until the table is full; `left[i]` is how many slots
 * member i may still claim. Int32 arithmetic throughout (see prepare).
 * `ids`, `pos` and `left` are scratch: they are rewritten.
 */
function fill(table: Int32Array, taken: Int32Array, ids: Int32Array, pos: Int32Array, skip: Int32Array, left: Int32Array, m: number): void {
  // `taken`: occupancy as a bitset, all clear on entry (8 KiB for 65537
  // slots, inside L1): the ~10 probes per slot a full Maglev fill makes stay
  // out of the 256 KiB table.
  // The turns run over the members that may still claim, kept in id order
  // as parallel arrays by rank (a member leaves once its quota is used up),
  // so a round skips no exhausted member and reads no index indirection.
  const n = ids.length;
  const rPos = new Int32Array(n);
  const rSkip = new Int32Array(n);
  const rLeft = new Int32Array(n);
  let active = 0;
  for (let k = 0; k < n; k++) {
    const i = ids[k]!;
    if (left[i]! <= 0) continue;
    ids[active] = i;
    rPos[active] = pos[i]!;
    rSkip[active] = skip[i]!;
    rLeft[active] = left[i]!;
    active++;
  }
  let filled = 0;
  while (filled < m) {
    let kept = 0;
    for (let k = 0; k < active; k++) {
      const step = rSkip[k]!;
      let slot = rPos[k]!;
      while ((taken[slot >>> 5]! & (1 << (slot & 31))) !== 0) {
        slot += step;
        if (slot >= m) slot -= m;
      }
      taken[slot >>> 5]! |= 1 << (slot & 31);
      const i = ids[k]!;
      table[slot] = i;
      if (++filled === m) return;
      const quota = rLeft[k]! - 1;
      if (quota > 0) {
        slot += step;
        ids[kept] = i;
        rPos[kept] = slot >= m ? slot - m : slot;
        rSkip[kept] = step;
        rLeft[kept] = quota;
        kept++;
      }
    }
    active = kept;
  }
}

function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
