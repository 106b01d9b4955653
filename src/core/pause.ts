/**
 * The spin-wait hint of compare-and-swap retry loops: `Atomics.pause()`
 * (ES2025; V8 ships it from 13.3, so Node 24 and later have it, Node 20 and
 * 22 do not) tells the CPU this thread is spinning (x86 `pause`, Arm
 * `yield`), which frees the core's resources for its SMT sibling and backs
 * the loop off the contended line a little. Where the runtime lacks it,
 * nothing: the loop retries at once, as before.
 */

/** `Atomics.pause` where the runtime has it. */
const nativePause = (Atomics as unknown as { pause?: (iterationNumber?: number) => void }).pause;
const HAS_PAUSE = typeof nativePause === 'function';

/**
 * One spin-wait hint, after a failed compare-and-swap and before the retry;
 * a no-op on runtimes without `Atomics.pause` (checked once, at load).
 */
export function spinPause(): void {
  if (HAS_PAUSE) (Atomics as unknown as { pause(): void }).pause();
}

/** True when this runtime has `Atomics.pause` (what {@link spinPause} uses). */
export function hasAtomicsPause(): boolean {
  return HAS_PAUSE;
}
