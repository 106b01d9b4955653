/**
 * The proxy's connection limit (`--max-connections`, HAProxy `maxconn`), one
 * counter shared by every accepting thread: three Int32 words over a
 * SharedArrayBuffer that the owner creates and every proxy worker receives
 * in its `workerData`.
 *
 * - word 0, `count`: connections admitted and not yet finished, all threads;
 * - word 1, `generation`: bumped on every release, the word waiters sleep on;
 * - word 2, `waiters`: listeners that hold clients and sleep on `generation`
 *   (a release notifies only when some do);
 * - from word 16, one word per accepting thread (`row`): the connections that
 *   thread holds in `count`. Only that thread writes its word, so when a proxy
 *   worker dies the owner takes its word back out of `count`
 *   ({@link ConnectionLimit.reclaim}) before a new worker takes the row.
 *
 * An over-limit client is accepted by the kernel and by Node (Node 20 / 24
 * cannot stop a listening handle from accepting: `readStop()` on the server
 * handle does not), but it is held paused — nothing read, no backend
 * connected — in its listener's FIFO until a slot frees in any thread; then
 * it is served in order. The order is per accepting thread: every thread
 * holding clients is woken and retries its own head, and the first CAS wins
 * (docs/proxy.md, "Connection limit"). Nobody is reset.
 *
 * Without a limit (`max` 0) no word is touched: every connection would
 * otherwise write the shared `count` from every core for a figure nobody
 * enforces (the proxy's open connections are in its ProxyCounters).
 * @internal
 */

const COUNT = 0;
const GENERATION = 1;
const WAITERS = 2;
const ROW_BASE = 16;

/** The shared words of one limit; `max` 0 means unlimited (then nothing is counted here). @internal */
export class ConnectionLimit {
  /** The shared memory (pass it to workers; it is shared, not copied). */
  readonly buffer: SharedArrayBuffer;
  /** Admitted connections at most, all threads; 0 = no limit. */
  readonly max: number;
  /** The thread row this instance counts into. */
  readonly row: number;
  private readonly words: Int32Array;
  private readonly rowWord: number;

  /** A new limit with `rows` thread rows (default 1), or a view of `buffer` counting into `row`. */
  constructor(max: number, buffer?: SharedArrayBuffer, row = 0, rows = 1) {
    this.max = max;
    this.buffer = buffer ?? new SharedArrayBuffer((ROW_BASE + rows) * Int32Array.BYTES_PER_ELEMENT);
    this.words = new Int32Array(this.buffer);
    if (row < 0 || ROW_BASE + row >= this.words.length) throw new RangeError(`ConnectionLimit: row ${row} is not in this limit`);
    this.row = row;
    this.rowWord = ROW_BASE + row;
  }

  /** Connections thread row `row` holds now. */
  held(row: number): number {
    return Atomics.load(this.words, ROW_BASE + row);
  }

  /**
   * Takes back the slots of an accepting thread that died (owner only, after
   * the thread's `'exit'`): zeroes its row and subtracts what it held from
   * `count`, then wakes the threads that hold clients. Returns that number.
   * Exact because the dead thread was the row's only writer and writes no
   * more; the row's word is changed right after the shared one in the same
   * function, with no call or loop edge between them where V8 could stop a
   * terminated thread.
   */
  reclaim(row: number): number {
    const w = this.words;
    const n = Atomics.exchange(w, ROW_BASE + row, 0);
    if (n !== 0) {
      Atomics.sub(w, COUNT, n);
      Atomics.add(w, GENERATION, 1);
      if (Atomics.load(w, WAITERS) > 0) Atomics.notify(w, GENERATION);
    }
    return n;
  }

  /** Connections admitted now, all threads (0 without a limit: nothing is counted). */
  get count(): number {
    return Atomics.load(this.words, COUNT);
  }

  /**
   * Admits one connection if the shared count is below `max`. The check and
   * the increment are one compare-and-swap on the single `count` word: of two
   * threads that both read `max - 1`, exactly one swap succeeds and the other
   * re-reads and sees `max`. The only invariant is `count <= max` on that
   * one word, so no lock and no second word take part.
   */
  tryTake(): boolean {
    if (this.max === 0) return true;
    const w = this.words;
    for (;;) {
      const c = Atomics.load(w, COUNT);
      if (c >= this.max) return false;
      if (Atomics.compareExchange(w, COUNT, c, c + 1) === c) {
        // The row follows the shared count: a thread stopped between the two
        // leaves its row one short, so a reclaim leaks that slot (the limit
        // stays a limit) rather than freeing one twice.
        Atomics.add(w, this.rowWord, 1);
        return true;
      }
    }
  }

  /** Releases one admitted connection and wakes the listeners that hold clients. */
  give(): void {
    if (this.max === 0) return;
    const w = this.words;
    Atomics.sub(w, this.rowWord, 1);
    Atomics.sub(w, COUNT, 1);
    // Bump before notifying: a waiter that read the old generation either
    // sleeps and is woken, or finds the word changed and does not sleep.
    Atomics.add(w, GENERATION, 1);
    if (Atomics.load(w, WAITERS) > 0) Atomics.notify(w, GENERATION);
  }

  /** The generation now (read before trying, then {@link wait} on it). */
  generation(): number {
    return Atomics.load(this.words, GENERATION);
  }

  /**
   * Resolves once the generation is no longer `seen` (a release happened
   * somewhere) or after `timeoutMs`; never blocks the event loop
   * (`Atomics.waitAsync`).
   */
  wait(seen: number, timeoutMs: number): Promise<unknown> {
    const w = this.words;
    Atomics.add(w, WAITERS, 1);
    const r = Atomics.waitAsync(w, GENERATION, seen, timeoutMs);
    const done = (): void => void Atomics.sub(w, WAITERS, 1);
    if (!r.async) {
      done();
      return Promise.resolve(r.value);
    }
    return r.value.then(done);
  }
}
