/**
 * The LoadTable's layout: every offset into its SharedArrayBuffer, and
 * nothing else (piscina's `symbols.ts` is the model). The region modules
 * beside this file each implement one protocol over these words; only they
 * and this file know where a word lives.
 *
 * All words are 32-bit, on one `Int32Array` over the buffer.
 *
 * | region        | words                                | contents |
 * |---------------|--------------------------------------|----------|
 * | header        | 32 (two 64-byte lines)               | layout version, capacity, thread rows, the three epochs, spec seqlock + length, PeakEWMA τ and initial value, rows in use, region bases (first line, read on every acquire); the spec blob's changed ranges, the admission waiters hint and generation, the aperture width and coordinate (words 22–23), the admission tickets (second line) |
 * | row owners    | `maxThreads`, rounded up to 16       | thread id + 1 of the thread that claimed attribution row r (0 = free) |
 * | row totals    | 16 per row (one line each)           | word k: the leases of kind k row r holds over all slots |
 * | admission rows| 32 per row (two lines each)          | row r's oldest admission waiter per band, and whether its gate counts in the waiters hint (admission-region.ts) |
 * | retry budget  | 32 (two lines)                       | the process's retry budget: its configuration, totals and windowed request / retry counters (retry-region.ts) |
 * | probe pool    | 16 (one line)                        | the process's probe pool: its limits (age, reuses, quantile, sample), the cold in-flight threshold, probe counters (probe-region.ts) |
 * | slots         | 64 per slot (four lines, line-aligned)| the slot table below |
 * | row cells     | one line of gap, then per row: `capacity × 2 + 12`, rounded up to 16 | row r's leases on slot s, kind k: the record a dead thread's leases are reclaimed from |
 * | spec blob     | `specBytes / 4`                      | the owner's UTF-8 spec text for every live slot, under a seqlock |
 *
 * Where the buffer starts. A SharedArrayBuffer's backing store comes from
 * malloc, which promises 16-byte alignment, not 64: Node 20 on Linux put
 * small tables at 0 or 48 bytes into a line and every table over glibc's
 * mmap threshold at 16 (`%DebugPrint`). So "a line of its own" means: a
 * region one thread writes is followed, inside its own whole lines, by
 * `START_SLACK` (12) words nobody else writes — then at any 16-byte-aligned
 * start its words never reach a line another thread writes. The row regions
 * are laid out so (test/load/false-sharing.test.ts checks every region at
 * the four possible starts); a slot's hot first line may straddle two lines,
 * which costs one more line per slot, not sharing between threads' own words.
 *
 * Slot words. The first line is what a pick and a release touch (the lease
 * counters, the tag, the PeakEWMA pair, the failures word); the second holds
 * what the owner writes and a view rebuild reads, and the statistics — and
 * the latency mean, which only `p2c:latency` with `latencyRatio` reads on a
 * pick (and a release writes at most once a millisecond per backend).
 *
 * | word | field           | region module | unit / encoding |
 * |------|-----------------|---------------|-----------------|
 * | 0    | tag             | slot-tags     | `generation << 3 \| state` |
 * | 1    | requests        | leases        | in-flight request leases, all threads (`LeaseKind.Request` = 0) |
 * | 2    | connections     | leases        | connection leases, all threads (`LeaseKind.Connection` = 1) |
 * | 3    | ewma lock       | ewma-region   | seqlock word: `version << 8 \| (writer row + 1)` |
 * | 4, 5 | connect est, at | ewma-region   | PeakEWMA connect time, integer µs; its last update, shared-clock ms mod 2^30 |
 * | 6, 7 | latency est, at | ewma-region   | PeakEWMA request latency, the same |
 * | 8    | failures        | passive-health| consecutive failures (bits 0–29); bit 30: ejections to clear |
 * | 16   | ejected until   | passive-health| shared-clock ms mod 2^30; 0 = not ejected |
 * | 17   | ejections       | passive-health| consecutive ejections (the backoff exponent) |
 * | 18   | ejections total | passive-health| every ejection of this occupant (wraps at 2^32) |
 * | 19   | health          | passive-health| owner-written flags (`HealthFlag`) |
 * | 20   | interval ok     | passive-health| successes since the owner's outlier detector last took them |
 * | 21   | interval fail   | passive-health| failures, the same |
 * | 22   | picks           | leases        | leases granted on this slot (wraps at 2^32; routers add in batches) |
 * | 23   | ramp start      | slow-start    | when the owner last made this occupant eligible (joined, passed its check again): shared-clock ms mod 2^30, 0 = none |
 * | 24   | agent weight    | backend-load  | the weight the backend's agent reports (HAProxy's agent protocol): a multiplier of its spec weight, ppm; written by the agent check only |
 * | 25   | agent flags     | backend-load  | 1 agent weight reported, 2 drain, 4 maint; written by the agent check only |
 * | 9    | role            | db-state      | owner-written: 0 unknown / none, 1 primary, 2 replica (database health checks) |
 * | 10   | lag             | db-state      | a replica's replay lag in ms (saturated at 2^30 − 1); 0 on a primary |
 * | 11   | LSN seqlock     | db-state      | even = stable, odd = the owner is writing words 12–13 |
 * | 12, 13 | replay LSN    | db-state      | PostgreSQL LSN high and low 32 bits (a primary's current WAL LSN, a replica's replay LSN) |
 * | 14   | connection share | connection-budget | this process's share of the backend's fleet connection limit; 0 = no budget |
 * | 15   | share refusals  | connection-budget | connection leases refused at the share since the owner last read it (demand for the rebalance) |
 * | 26, 27 | latency mean, at | ewma-region | plain EWMA of the request latency (no peak rule), integer µs, negated while it is the initial estimate (no sample yet); its last update (moves with word 7) — second line: only `p2c:latency`'s picks read it (the tail rule; the cost: negated = unmeasured, probed) |
 * | 28   | latency since   | ewma-region   | when the request latency's first sample came (ms mod 2^30); −1 before it and once the series is τ old (the cold start) |
 * | 29–31 | reserved | —             | 0 |
 *
 * Third line: ORCA reports (written by whichever thread saw one, read by the
 * owner's periodic A58 computation; never by a pick).
 *
 * | 32   | report seqlock  | backend-load  | ORCA report words 33–37: even = stable, odd = a thread is writing them (writers take it by compare-and-swap) |
 * | 33   | report utilization | backend-load | the last ORCA report's utilization, millionths (saturated at 2^30 − 1) |
 * | 34   | report qps      | backend-load  | its `rps_fractional`, hundredths (saturated at 2^30 − 1) |
 * | 35   | report eps      | backend-load  | its `eps`, hundredths (saturated at 2^30 − 1) |
 * | 36   | report at       | backend-load  | when it was reported: shared-clock ms mod 2^30, 0 = none (a 0 reading is stored as 1) |
 * | 37   | reporting since | backend-load  | when the unbroken run of reports it belongs to began (A58's blackout counts from here) |
 * | 38   | first verdicts  | verdicts      | owner-written: the health sources whose first result this occupant still awaits (1 check, 2 agent, 4 ORCA); read by `ready()` and a refused `acquireAsync({ intent })`, never by a pick |
 * | 39   | ORCA weight     | backend-load  | the owner's A58 weight (health/orca.ts, its only writer): a multiplier of the spec weight, ppm + 1; 0 = none. Combined with word 24 by runtime/effective-weight.ts's one rule |
 * | 40–47 | latency histogram | latency-histogram | 15 buckets of 16-bit decaying counts of the request latency to headers (bucket k ≤ 128 µs·2^k, the last open), two to a word; word 47's high half: samples since the last decay. Written by every `success` release with a latency, read at hedge time (the HTTP dispatcher's adaptive delay), never by a pick |
 * | 48   | probe seqlock   | probe-region  | words 49–51: even = stable, odd = a thread is writing them (writers take it by compare-and-swap) |
 * | 49   | probe in-flight | probe-region  | the requests in flight the backend last reported (a probe's answer or a response's `poise-load` header) |
 * | 50   | probe latency   | probe-region  | the latency estimate it reported, integer µs (saturated at 2^30 − 1) |
 * | 51   | probe at        | probe-region  | when: shared-clock ms mod 2^30, 0 = none (a 0 reading is stored as 1) |
 * | 52   | probe uses      | probe-region  | picks that chose the backend on that answer (reset by the next answer) |
 * | 53–63 | reserved | —             | 0 |
 */
import { invalidConfig } from '../core/errors.js';
import { integerIn } from '../core/validate.js';

/** The layout version in header word 0; an attachment with another version is refused. */
export const LAYOUT_VERSION = 0x504f0013;

// --- header -------------------------------------------------------------------
export const H_VERSION = 0;
export const H_CAPACITY = 1;
export const H_THREADS = 2;
export const H_CHANGE_EPOCH = 3;
export const H_MEMBER_EPOCH = 4;
export const H_HEALTH_EPOCH = 5;
export const H_SPEC_SEQ = 6;
export const H_SPEC_LEN = 7;
export const H_TAU_MS = 8;
export const H_INITIAL_US = 9;
/** Rows in use: one more than the highest row ever claimed (raised by claimRow, never lowered). */
export const H_ROWS = 10;
export const H_SLOT_BASE = 12;
export const H_SPEC_WORDS = 13;
/** Slow start (slow-start.ts): the ramp window, ms; 0 = off. */
export const H_SLOW_WINDOW_MS = 11;
/** Slow start: the aggression, thousandths. */
export const H_SLOW_AGGRESSION = 14;
/** Slow start: the floor of the factor, thousandths. */
export const H_SLOW_MIN = 15;
/** Four words: the two ranges (from, to) of the spec blob that the last publication changed. */
export const H_SPEC_RANGES = 16;
/** Gates with admission waiters now (a hint every release reads plainly). */
export const A_WAITERS = 20;
/** Bumped when capacity frees while gates wait; they wait on it. */
export const A_GENERATION = 21;
/** Aperture (aperture-region.ts): the width, millionths of the ring; 0 = off. */
export const H_APERTURE_WIDTH = 22;
/** Aperture: the process's coordinate, `processes << 16 | rank` (unsigned); 0 = none yet (the whole ring). */
export const H_APERTURE_COORD = 23;
/** Band indices whose waiters are ordered across threads. */
export const ADMISSION_BANDS = 8;
/** The next ticket of band index b is word `A_TICKETS + b`. */
export const A_TICKETS = 24;
export const HEADER_WORDS = 32;

// --- admission rows -----------------------------------------------------------------
/** Row r's oldest waiter of band b: word `A_ROW_OLDEST + b` of its admission line. */
export const A_ROW_OLDEST = 0;
/** Whether row r's gate counts in the waiters hint. */
export const A_ROW_COUNTED = ADMISSION_BANDS;
/**
 * Words of one row's admission lines: its 9 words and {@link START_SLACK}
 * after them, in whole lines (two), so no other thread's line is reached
 * whatever the buffer's start (the layout comment, "Where the buffer starts").
 */
export const ADMISSION_ROW_WORDS = 32;

// --- retry budget (retry-region.ts) ----------------------------------------------
/** Words of the retry budget region (two lines). */
export const RETRY_WORDS = 32;

// --- probe pool (probe-region.ts) --------------------------------------------------
/** Words of the probe pool's process region (one line). */
export const PROBE_WORDS = 16;
/** 1 while a probe pool is configured (the owner's `health.probe`). */
export const P_ON = 0;
/** A probe answer older than this, ms, is not used. */
export const P_MAX_AGE_MS = 1;
/** An answer chosen on this many times is not used again. */
export const P_MAX_USES = 2;
/** The hot-cold quantile, millionths. */
export const P_QUANTILE_PPM = 3;
/** Probed members a pick samples. */
export const P_SAMPLE = 4;
/** The owner's cold threshold: the quantile of the fresh answers' in-flight counts, + 1 (0 = not known). */
export const P_COLD_RIF = 5;
/** Probes sent (the owner's prober). */
export const P_SENT = 6;
/** Answers recorded from probes. */
export const P_ANSWERS = 7;
/** Reports recorded from ordinary responses' headers. */
export const P_HEADER_REPORTS = 8;

// --- slots --------------------------------------------------------------------
export const S_TAG = 0;
/** The lease counter of kind k is word `S_LEASES + k`. */
export const S_LEASES = 1;
export const S_EWMA_LOCK = 3;
/** The estimate of series k is word `S_EWMA + 2k`, its timestamp the next. */
export const S_EWMA = 4;
export const S_FAILURES = 8;
export const S_EJECTED_UNTIL = 16;
export const S_EJECTIONS = 17;
export const S_EJECTIONS_TOTAL = 18;
export const S_HEALTH = 19;
export const S_INTERVAL_OK = 20;
export const S_INTERVAL_FAIL = 21;
export const S_PICKS = 22;
export const S_RAMP_START = 23;
/** The agent's weight (backend-load.ts): ppm, valid while bit 1 of word 25 is set. */
export const S_REPORTED_WEIGHT = 24;
/** The agent's flags (backend-load.ts): 1 weight reported, 2 drain, 4 maint. */
export const S_REPORTED_STATE = 25;
/** Database role (db-state): 0 unknown or none, 1 primary, 2 replica. */
export const S_ROLE = 9;
/** Replica replay lag in ms (db-state). */
export const S_LAG_MS = 10;
/** Seqlock over the replay LSN pair (db-state). */
export const S_LSN_SEQ = 11;
/** Replay LSN high 32 bits; the low 32 bits are the next word (db-state). */
export const S_LSN_HI = 12;
export const S_LSN_LO = 13;
/** This process's share of the fleet connection budget for the backend; 0 = none (connection-budget). */
export const S_CONN_SHARE = 14;
/** Connection leases refused at the share since the owner last read it (connection-budget). */
export const S_SHARE_REFUSED = 15;
/**
 * The request latency's plain EWMA (no peak rule) in µs, its timestamp the
 * next word; updated with the PeakEWMA latency under its lock (ewma-region.ts),
 * read by `p2c:latency`'s tail rule (`latencyRatio`) and, negated (no sample
 * yet), by its cost, which probes an unmeasured slot (slot-candidate.ts).
 */
export const S_EWMA_MEAN = 26;
/**
 * When the request latency's first sample came (wrapped ms; −1 before it and
 * once the series is τ old): until then its samples blend with the weight of
 * a mean over the series' age instead of τ (ewma-region.ts, the cold start).
 */
export const S_EWMA_SINCE = 28;
/** ORCA report seqlock (backend-load): even = stable, odd = being written. */
export const S_ORCA_SEQ = 32;
/** ORCA report utilization, millionths (backend-load). */
export const S_ORCA_UTIL = 33;
/** ORCA report queries/s, hundredths (backend-load). */
export const S_ORCA_QPS = 34;
/** ORCA report errors/s, hundredths (backend-load). */
export const S_ORCA_EPS = 35;
/** When the last ORCA report came, wrapped ms; 0 = none (backend-load). */
export const S_ORCA_AT = 36;
/** When the unbroken run of ORCA reports began, wrapped ms (backend-load). */
export const S_ORCA_SINCE = 37;
/** The health sources whose first verdict the occupant still awaits (verdicts.ts). */
export const S_VERDICTS = 38;
/** ORCA's weight (backend-load.ts): ppm + 1, 0 = none; written by the owner's A58 computation only. */
export const S_ORCA_WEIGHT = 39;
/** The latency histogram's first word (latency-histogram.ts): words 40–47. */
export const S_LATENCY_HIST = 40;
/** Words per slot: 64 × 4 bytes = four 64-byte cache lines. */
export const SLOT_WORDS = 64;

/** Probe seqlock (probe-region): even = words 49–51 stable. */
export const S_PROBE_SEQ = 48;
/** The reported requests in flight (probe-region). */
export const S_PROBE_RIF = 49;
/** The reported latency estimate, µs (probe-region). */
export const S_PROBE_LATENCY = 50;
/** When the report came, wrapped ms; 0 = none (probe-region). */
export const S_PROBE_AT = 51;
/** Picks made on that report (probe-region). */
export const S_PROBE_USES = 52;

/** Words of one row's totals: a whole line, so rows never share one (its 2 words and {@link START_SLACK} fit in it). */
export const TOTAL_WORDS = 16;
/**
 * Words (48 bytes) a 16-byte-aligned buffer may start into a 64-byte line:
 * every region one thread writes is followed by this many words no other
 * thread writes, within its own lines (the layout comment).
 */
export const START_SLACK = 12;
/** Lease kinds per slot and row. */
export const KINDS = 2;

/** Where every region starts, for one capacity and row count. */
export class Layout {
  /** Slots. */
  readonly capacity: number;
  /** Attribution rows. */
  readonly maxThreads: number;
  readonly ownerBase: number;
  readonly totalsBase: number;
  readonly admissionBase: number;
  /** First word of the retry budget region. */
  readonly retryBase: number;
  /** First word of the probe pool region. */
  readonly probeBase: number;
  readonly slotBase: number;
  readonly cellsBase: number;
  /** Words of one row's cells (`capacity × KINDS` and {@link START_SLACK}, rounded up to whole lines). */
  readonly cellStride: number;
  readonly specBase: number;
  readonly specWords: number;
  /** Words in all. */
  readonly words: number;

  private constructor(capacity: number, maxThreads: number, slotBase: number, specWords: number) {
    this.capacity = capacity;
    this.maxThreads = maxThreads;
    this.ownerBase = HEADER_WORDS;
    this.totalsBase = HEADER_WORDS + roundUp(maxThreads, 16);
    this.admissionBase = this.totalsBase + maxThreads * TOTAL_WORDS;
    this.retryBase = this.admissionBase + maxThreads * ADMISSION_ROW_WORDS;
    this.probeBase = this.retryBase + RETRY_WORDS;
    this.slotBase = slotBase;
    // A line between the last slot (whose ORCA words any thread writes) and the first row's cells.
    this.cellsBase = roundUp(slotBase + capacity * SLOT_WORDS, 16) + 16;
    this.cellStride = roundUp(capacity * KINDS + START_SLACK, 16);
    this.specBase = this.cellsBase + maxThreads * this.cellStride;
    this.specWords = specWords;
    this.words = this.specBase + specWords;
  }

  /**
   * The layout of a new table. `unaligned` shifts the slot array by 32
   * bytes, so every slot straddles lines shared with its neighbours — only for
   * the benchmark that shows what the alignment is worth.
   */
  static plan(capacity: number, maxThreads: number, specBytes: number, unaligned: boolean): Layout {
    const slotBase =
      HEADER_WORDS +
      roundUp(maxThreads, 16) +
      maxThreads * (TOTAL_WORDS + ADMISSION_ROW_WORDS) +
      RETRY_WORDS +
      PROBE_WORDS +
      (unaligned ? 8 : 0);
    return new Layout(capacity, maxThreads, slotBase, Math.ceil(specBytes / 4));
  }

  /** Writes the header words a reader needs to find the regions (before the buffer is shared). */
  writeHeader(i32: Int32Array, tauMs: number, initialUs: number): void {
    // Initialisation happens before any other thread can see the buffer;
    // stores go through Atomics anyway, so no access to shared memory is plain
    // outside the documented hot-path reads.
    Atomics.store(i32, H_CAPACITY, this.capacity);
    Atomics.store(i32, H_THREADS, this.maxThreads);
    Atomics.store(i32, H_TAU_MS, tauMs);
    Atomics.store(i32, H_INITIAL_US, initialUs);
    Atomics.store(i32, H_SLOT_BASE, this.slotBase);
    Atomics.store(i32, H_SPEC_WORDS, this.specWords);
    Atomics.store(i32, H_VERSION, LAYOUT_VERSION);
  }

  /** The layout of an existing table; refuses a buffer of another layout version. */
  static read(i32: Int32Array): Layout {
    if (i32.length < HEADER_WORDS || Atomics.load(i32, H_VERSION) !== LAYOUT_VERSION) {
      invalidConfig(
        'buffer',
        `is not a LoadTable of layout version ${LAYOUT_VERSION.toString(16)} (same poise-lb version in every thread)`,
      );
    }
    const capacity = integerIn(Atomics.load(i32, H_CAPACITY), 'buffer.capacity', 1, 65536);
    const maxThreads = integerIn(Atomics.load(i32, H_THREADS), 'buffer.maxThreads', 1, 255);
    const layout = new Layout(capacity, maxThreads, Atomics.load(i32, H_SLOT_BASE), Atomics.load(i32, H_SPEC_WORDS));
    if (layout.words > i32.length) invalidConfig('buffer', `is ${i32.length * 4} bytes, its header asks for ${layout.words * 4}`);
    return layout;
  }

  /** First word of slot `slot`. */
  slot(slot: number): number {
    return this.slotBase + slot * SLOT_WORDS;
  }

  /** Row `row`'s cell of kind `kind` on slot `slot`. */
  cell(row: number, slot: number, kind: number): number {
    return this.cellsBase + row * this.cellStride + slot * KINDS + kind;
  }

  /** First word of row `row`'s admission line. */
  admissionRow(row: number): number {
    return this.admissionBase + row * ADMISSION_ROW_WORDS;
  }

  /** Row `row`'s total of kind `kind`. */
  total(row: number, kind: number): number {
    return this.totalsBase + row * TOTAL_WORDS + kind;
  }
}

function roundUp(n: number, m: number): number {
  return Math.ceil(n / m) * m;
}
