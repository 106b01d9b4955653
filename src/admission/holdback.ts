/**
 * Band holdback ceilings: per-band admission ceilings in [0, 1] against
 * pool saturation. A band is a rank, larger = more important. As saturation
 * rises, the less important bands are held back first, reserving headroom
 * for the more important work.
 *
 * The most important band gets `maxCeiling`, the least `minCeiling`:
 * - `domain: 'rank'` (default) spaces ceilings evenly by ordinal position:
 *   c_i = max − i · (max − min) / (N − 1), i = 0 for the most important band;
 * - `domain: 'value'` scales by the band's number within the active range:
 *   c_i = min + (b_i − bMin) / (bMax − bMin) · (max − min).
 * A single active band (or all equal values) gets `maxCeiling`.
 */
import { invalidConfig, checkOptionKeys } from '../core/errors.js';
import { finiteNumber } from '../core/validate.js';

/** Options of {@link holdbackCeilings}. */
export interface HoldbackOptions {
  /** Interpolation curve; only `'linear'` exists. */
  shape?: 'linear';
  /** `'rank'` (default) or `'value'`. */
  domain?: 'rank' | 'value';
  /** Ceiling of the least important band, in [0, 1). Required: no default is right for everyone. */
  minCeiling: number;
  /** Ceiling of the most important band, in (0, 1]; default 1; must be ≥ minCeiling. */
  maxCeiling?: number;
}

/**
 * Ceilings for bands given in descending order (most important first;
 * larger numbers are more important, as in the flow-control seed). Returns
 * one ceiling per band, in the same order.
 *
 * @example
 * holdbackCeilings([10, 5, 1], { minCeiling: 0.4, maxCeiling: 0.9 });                 // [0.9, 0.65, 0.4]
 * holdbackCeilings([10, 5, 1], { minCeiling: 0.4, maxCeiling: 0.9, domain: 'value' }); // [0.9, 0.622…, 0.4]
 */
export function holdbackCeilings(bandsDescending: readonly number[], options: HoldbackOptions): number[] {
  checkOptionKeys(options, ['shape', 'domain', 'minCeiling', 'maxCeiling']);
  const { shape = 'linear', domain = 'rank', minCeiling, maxCeiling = 1 } = options ?? ({} as HoldbackOptions);
  if (shape !== 'linear') invalidConfig('options.shape', 'must be "linear"', shape);
  if (domain !== 'rank' && domain !== 'value') invalidConfig('options.domain', 'must be "rank" or "value"', domain);
  if (typeof minCeiling !== 'number' || !(minCeiling >= 0 && minCeiling < 1)) {
    invalidConfig('options.minCeiling', 'is required and must be a number in [0, 1)', minCeiling);
  }
  if (typeof maxCeiling !== 'number' || !(maxCeiling > 0 && maxCeiling <= 1)) {
    invalidConfig('options.maxCeiling', 'must be a number in (0, 1]', maxCeiling);
  }
  if (minCeiling > maxCeiling) {
    invalidConfig('options.minCeiling', `must not exceed options.maxCeiling (${maxCeiling})`, minCeiling);
  }
  if (!Array.isArray(bandsDescending)) invalidConfig('bandsDescending', 'must be an array', bandsDescending);
  const n = bandsDescending.length;
  for (let i = 0; i < n; i++) {
    const p = bandsDescending[i];
    finiteNumber(p, `bandsDescending[${i}]`);
    if (i > 0 && !(p < bandsDescending[i - 1]!)) {
      invalidConfig(`bandsDescending[${i}]`, `must be strictly below the previous band ${bandsDescending[i - 1]}`, p);
    }
  }
  if (n === 0) return [];
  if (n === 1) return [maxCeiling];
  const span = maxCeiling - minCeiling;
  if (domain === 'rank') {
    // The last one is pinned to minCeiling exactly (no float drift at the end).
    return bandsDescending.map((_, i) => (i === n - 1 ? minCeiling : maxCeiling - (i * span) / (n - 1)));
  }
  const pMax = bandsDescending[0]!;
  const pMin = bandsDescending[n - 1]!;
  return bandsDescending.map((p, i) =>
    i === 0 ? maxCeiling : i === n - 1 ? minCeiling : minCeiling + ((p - pMin) / (pMax - pMin)) * span,
  );
}

/**
 * The admission limit of a band with `ceiling` over `capacity` permits:
 * admit while `held < holdbackLimit(ceiling, capacity)`. That is
 * held / capacity ≤ ceiling and held < capacity in integers:
 * held ≤ floor(ceiling × capacity) and held < capacity. The epsilon keeps
 * 0.3 × 10 from flooring to 2. The one place the AdmissionGate computes
 * it.
 * @internal
 *
 * @example
 * holdbackLimit(0.3, 10); // 4: admitted while 0..3 are held (3 / 10 ≤ 0.3)
 */
export function holdbackLimit(ceiling: number, capacity: number): number {
  return Math.min(capacity, Math.floor(ceiling * capacity + 1e-9) + 1);
}
