/**
 * The proxy's connection limit (`--max-connections`, HAProxy `maxconn`), one
 * counter shared by every accepting thread: Int32 words over a
 * SharedArrayBuffer that the owner creates and every proxy worker receives
 * in its `workerData`.
 *
 * - word 0, `count`: connections admitted and not yet finished, all threads,
 *   in its low 20 bits; the high 12 bits are a sequence every take and give
 *   advances (the word never holds the same value before and after an
 *   operation, which is what lets a reclaim tell that nothing moved);
 * - word 1, `generation`: bumped on every release, the word waiters sleep on;
 * - word 2, `waiters`: listeners that hold clients and sleep on `generation`
 *   (a release notifies only when some do);
 * - from word 16, one word per accepting thread (`row`): the connections that
 *   thread holds in `count`; while it is between marking its row and
 *   finishing its change of `count`, the PENDING bit and the lower of the
 *   row's values before and after the change. Only that thread
 *   writes its word, so when a proxy worker dies the owner takes its word
 *   back out of `count` ({@link ConnectionLimit.reclaim}) before a new
 *   worker takes the row.
 *
 * A terminated thread stops wherever V8 checks for interrupts, which can be
 * between its change of `count` and its change of its row (measured: a thread
 * looping take/give and terminated at random moments stopped there in 134 of
 * 300 terminations). The PENDING bit marks that window; the owner settles a
 * dead row found in it by a double collect: `count` minus every other row,
 * read while `count` (value and sequence) stood still and no other row was
 * pending (as the lease table settles a dead row's PENDING cells).
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

/** The count field of the `count` word (and of a row word); the largest `maxConnections`. */
export const MAX_CONNECTIONS_LIMIT = (1 << 20) - 1;
const COUNT_MASK = MAX_CONNECTIONS_LIMIT;
/** One step of the `count` word's sequence (its high 12 bits; wraps). */
const SEQ_ONE = 1 << 20;
/** A row word's mark: its thread is changing `count`. */
const PENDING = 1 << 30;
/**
 * Double collects a reclaim tries, and for at least how long, before it takes a dead row's pending change as
 * not done. Both bounds, because under a loaded machine (a fresh-clone CI at load average 20) 10,000 collects
 * beside a thread churning take/give can all fail — most of them descheduled past COLLECT_MAX_MS — and the
 * fallback then leaked a slot; a reclaim is rare (a worker's death), so spinning up to 50 ms there is cheap.
 */
const COLLECT_ATTEMPTS = 10_000;
const COLLECT_PATIENCE_MS = 50;
/** A collect that took longer (the owner was descheduled) is not trusted: the sequence could have wrapped. */
const COLLECT_MAX_MS = 1;

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
  /** This thread's row count (it is the row's only writer): what the row word holds without its mark. */
  private mine = 0;

  /** A new limit with `rows` thread rows (default 1), or a view of `buffer` counting into `row`. */
  constructor(max: number, buffer?: SharedArrayBuffer, row = 0, rows = 1) {
    if (!Number.isInteger(max) || max < 0 || max > MAX_CONNECTIONS_LIMIT)
      throw new RangeError(`ConnectionLimit: max ${max} is not an integer in [0, ${MAX_CONNECTIONS_LIMIT}]`);
    this.max = max;
    this.buffer = buffer ?? new SharedArrayBuffer((ROW_BASE + rows) * Int32Array.BYTES_PER_ELEMENT);
    this.words = new Int32Array(this.buffer);
    if (row < 0 || ROW_BASE + row >= this.words.length) throw new RangeError(`ConnectionLimit: row ${row} is not in this limit`);
    this.row = row;
    this.rowWord = ROW_BASE + row;
    this.mine = Atomics.load(this.words, this.rowWord) & COUNT_MASK;
  }

  /** Connections thread row `row` holds now. */
  held(row: number): number {
    return Atomics.load(this.words, ROW_BASE + row) & COUNT_MASK;
  }

  /**
   * Takes back the slots of an accepting thread that died (owner only, after
   * the thread's `'exit'`): zeroes its row and subtracts what it held from
   * `count`, then wakes the threads that hold clients. Returns that number.
   * Exact because the dead thread was the row's only writer and writes no
   * more: a row it left PENDING is settled by a double collect over the
   * other rows (file comment). Should `count` never stand still for
   * {@link COLLECT_ATTEMPTS} collects and {@link COLLECT_PATIENCE_MS} ms, the row's marked value is taken — the
   * lower of before and after — so a pending take is taken as not done and
   * a pending give as done: at worst one slot leaks (the limit stays a
   * limit), none is freed twice.
   */
  reclaim(row: number): number {
    const w = this.words;
    const v = Atomics.load(w, ROW_BASE + row);
    let n = v & COUNT_MASK;
    if ((v & PENDING) !== 0) {
      const settled = this.settle(row);
      if (settled >= 0) n = settled;
    }
    Atomics.store(w, ROW_BASE + row, 0);
    if (n !== 0) {
      // The count field loses n, the sequence gains one: count >= n, so nothing borrows.
      Atomics.add(w, COUNT, SEQ_ONE - n);
      Atomics.add(w, GENERATION, 1);
      if (Atomics.load(w, WAITERS) > 0) Atomics.notify(w, GENERATION);
    }
    return n;
  }

  /** The dead row's true share of `count`: `count` minus the other rows, read while nothing moved; -1 if it never stood still. */
  private settle(dead: number): number {
    const w = this.words;
    const rows = w.length - ROW_BASE;
    const start = performance.now();
    for (let attempt = 0; attempt < COLLECT_ATTEMPTS || performance.now() - start < COLLECT_PATIENCE_MS; attempt++) {
      const t0 = performance.now();
      const before = Atomics.load(w, COUNT);
      let others = 0;
      let busy = false;
      for (let r = 0; r < rows; r++) {
        if (r === dead) continue;
        const v = Atomics.load(w, ROW_BASE + r);
        if ((v & PENDING) !== 0) busy = true;
        others += v & COUNT_MASK;
      }
      if (!busy && Atomics.load(w, COUNT) === before && performance.now() - t0 < COLLECT_MAX_MS) return (before & COUNT_MASK) - others;
    }
    return -1;
  }

  /** Connections admitted now, all threads (0 without a limit: nothing is counted). */
  get count(): number {
    return Atomics.load(this.words, COUNT) & COUNT_MASK;
  }

  /**
   * Admits one connection if the shared count is below `max`. The check and
   * the increment are one compare-and-swap on the single `count` word: of two
   * threads that both read `max - 1`, exactly one swap succeeds and the other
   * re-reads and sees `max`. The only invariant is `count <= max` on that
   * one word, so no lock and no second word take part. The row is marked
   * PENDING around the swap (file comment).
   */
  tryTake(): boolean {
    if (this.max === 0) return true;
    const w = this.words;
    const max = this.max;
    if ((Atomics.load(w, COUNT) & COUNT_MASK) >= max) return false;
    const mine = this.mine;
    Atomics.store(w, this.rowWord, mine | PENDING);
    for (;;) {
      const c = Atomics.load(w, COUNT);
      if ((c & COUNT_MASK) >= max) {
        Atomics.store(w, this.rowWord, mine);
        return false;
      }
      if (Atomics.compareExchange(w, COUNT, c, (c + SEQ_ONE + 1) | 0) === c) break;
    }
    this.mine = mine + 1;
    Atomics.store(w, this.rowWord, mine + 1);
    return true;
  }

  /** Releases one admitted connection and wakes the listeners that hold clients. */
  give(): void {
    if (this.max === 0) return;
    const w = this.words;
    const mine = this.mine;
    // Marked with the lower of before and after (as a take is): read unsettled, the row errs towards a leak.
    Atomics.store(w, this.rowWord, (mine - 1) | PENDING);
    // The count field loses one, the sequence gains one (count >= 1: nothing borrows).
    Atomics.add(w, COUNT, SEQ_ONE - 1);
    this.mine = mine - 1;
    Atomics.store(w, this.rowWord, mine - 1);
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
