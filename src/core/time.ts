/**
 * The one place for time that wraps. Shared-clock readings and the times the
 * LoadTable stores are whole milliseconds modulo 2^30 (12.4 days): below 2^30
 * they stay V8 small integers, so reading, storing and comparing them never
 * allocates (docs/internals.md, "Numbers that do not allocate"). Two such
 * times are compared by their wrapping difference, which is exact while the
 * true distance is under 2^29 ms (6.2 days) either way.
 * @internal
 */

/** Times are kept modulo 2^30 ms: `ms & TIME_MASK`. @internal */
export const TIME_MASK = 0x3fffffff;

/** `ms` reduced to the wrapped time domain [0, 2^30). @internal */
export function wrapMs(ms: number): number {
  return ms & TIME_MASK;
}

/**
 * `now − then` for two wrapped times, as a signed 30-bit difference in
 * [−2^29, 2^29): positive when `now` is after `then`, across the wrap too.
 *
 * @example
 * elapsedMs(5, TIME_MASK - 4); // 10: ten milliseconds across the wrap
 * @internal
 */
export function elapsedMs(now: number, then: number): number {
  return ((now - then) << 2) >> 2;
}
