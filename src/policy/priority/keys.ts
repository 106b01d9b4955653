/**
 * The (priority, locality) key table of the sampling stage.
 *
 * `find` gives every sampled candidate a small key number — one per distinct
 * (priority, locality) pair, numbered in order of first appearance — using a
 * verified guess (the key that followed the previous candidate's key in the
 * last scan), so a stable snapshot costs about one comparison per candidate.
 * `sort` orders the keys by (priority, locality) and is skipped when the
 * table is unchanged since the last sort. The sampling stage uses the
 * keys for a counting sort of the candidates. Everything is retained: nothing allocates.
 */

/** Distinct (priority, locality) keys a table holds; more make `find` give up (−1). */
export const MAX_KEYS = 64;

/** Retained key table (see the module comment). */
export class KeyTable {
  /** Priority and locality of each key. */
  readonly prio = new Uint32Array(MAX_KEYS);
  readonly loc: string[] = new Array<string>(MAX_KEYS).fill('');
  /** Keys in (priority, locality) order after {@link sort}. */
  readonly order = new Int32Array(MAX_KEYS);
  /** Scan hint: the key that last followed key j (slot MAX_KEYS: the first key). Only a guess, always verified. */
  private readonly next = new Int32Array(MAX_KEYS + 1);
  /** Distinct keys found by the last scan (the valid prefix of prio / loc). */
  private count = 0;
  /** Number of keys `order` was sorted for; −1 once an entry of the table changes. */
  private sorted = -1;

  /**
   * Assigns candidate i (of `n`) its key in `keyOf[i]`; returns the number of
   * distinct keys, or −1 when there are more than MAX_KEYS. Without locality
   * every key's name is '' and only priorities are compared.
   */
  find(n: number, prio: Uint32Array, loc: readonly string[], withLocality: boolean, keyOf: Int32Array): number {
    const keyPrio = this.prio;
    const keyLoc = this.loc;
    const next = this.next;
    // Keys 0..k−1 of this scan equal those of the previous scan while `stable`;
    // the previous scan's first `valid` keys are distinct, so while stable the
    // next new key may be recognised at slot k without scanning.
    const valid = this.count;
    let stable = true;
    let k = 0;
    let last = MAX_KEYS; // the start-of-scan hint slot
    for (let i = 0; i < n; i++) {
      const p = prio[i]!;
      const name = withLocality ? loc[i]! : '';
      // Guess: the key that followed the previous candidate's key last time
      // (repeats, round-robin interleaving and sorted runs all hit).
      let j = next[last]!;
      if ((j < k || (j === k && stable && k < valid)) && keyPrio[j] === p && (!withLocality || keyLoc[j] === name)) {
        if (j === k) k++;
      } else {
        j = 0;
        while (j < k && !(keyPrio[j] === p && (!withLocality || keyLoc[j] === name))) j++;
        if (j === k) {
          if (k === MAX_KEYS) {
            this.count = MAX_KEYS;
            this.sorted = -1;
            return -1;
          }
          if (keyPrio[k] !== p || keyLoc[k] !== name) {
            stable = false;
            this.sorted = -1;
            keyPrio[k] = p;
            keyLoc[k] = name;
          }
          k++;
        }
        next[last] = j;
      }
      keyOf[i] = j;
      last = j;
    }
    this.count = k;
    return k;
  }

  /** Insertion sort of the `k` keys by (priority, locality) into `order`, skipped when the table is unchanged. */
  sort(k: number): void {
    // The same key table as last time (the usual case for a stable snapshot): same order.
    if (this.sorted === k) return;
    this.sorted = k;
    const order = this.order;
    for (let a = 0; a < k; a++) {
      let b = a;
      while (b > 0 && this.before(a, order[b - 1]!)) {
        order[b] = order[b - 1]!;
        b--;
      }
      order[b] = a;
    }
  }

  private before(a: number, b: number): boolean {
    const pa = this.prio[a]!;
    const pb = this.prio[b]!;
    return pa !== pb ? pa < pb : this.loc[a]! < this.loc[b]!;
  }
}
