/**
 * What admission control shows to metrics: the shape the metrics collector
 * (src/metrics) reads at scrape time. An admission controller implements it
 * (`AdmissionGate.admissionStats()` returns these fields); types only here,
 * so admission imports nothing of metrics.
 */

/** One band of an admission controller, as of now. */
export interface AdmissionBandFigures {
  /** The band's rank, larger = more important (the `band` label). */
  readonly band: number;
  /** Requests waiting in the band's queue now. */
  readonly queued: number;
  /** How long the oldest waiter of the band has waited, ms; 0 when the queue is empty. */
  readonly oldestWaitMs: number;
  /** Requests admitted since start (monotonic). */
  readonly admitted: number;
  /** Requests rejected since start, by reason (each monotonic), e.g. `{ QueueFull: 3, QueueTimeout: 1 }`. */
  readonly rejected: Readonly<Record<string, number>>;
}

/** A snapshot of an admission controller. */
export interface AdmissionFigures {
  /** Pool saturation now (load / capacity), when the controller knows it. */
  readonly saturation?: number;
  /** Waiters over every band, when the controller counts them. */
  readonly waiting?: number;
  /** Every band. */
  readonly bands: readonly AdmissionBandFigures[];
}

/** Implemented by an admission controller that metrics can scrape. */
export interface AdmissionStatsSource {
  /** A snapshot (called once per scrape, off the request path). */
  admissionStats(): AdmissionFigures;
}
