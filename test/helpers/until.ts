/**
 * The one way a test waits: poll a condition until it holds or a deadline
 * passes. A test never sleeps to let something happen; it names what it
 * waits for, and a wait that does not end fails with that name.
 */

/** For this long a wait polls on every event-loop turn (socket events land within a few turns). */
const EVERY_TURN_MS = 10;

/**
 * Resolves once `probe` returns true; rejects naming `what` when it has not
 * by `deadlineMs`. Polls on every event-loop turn for the first 10 ms, then
 * every `everyMs` (raise it for a probe that costs round trips). The probe
 * is asked once more at the deadline, so a starved event loop does not time
 * out a condition that holds; an exception of the probe rejects at once.
 */
export async function until(probe: () => boolean | Promise<boolean>, what: string, deadlineMs = 15_000, everyMs = 10): Promise<void> {
  const start = performance.now();
  for (;;) {
    if (await probe()) return;
    const waited = performance.now() - start;
    if (waited >= deadlineMs) throw new Error(`timed out after ${deadlineMs} ms waiting for ${what}`);
    await new Promise((r) => (waited < EVERY_TURN_MS ? setImmediate(r) : setTimeout(r, Math.min(everyMs, deadlineMs - waited))));
  }
}
