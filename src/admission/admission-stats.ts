/**
 * AdmissionStats: what admission control shows to metrics. The metrics
 * collector (src/metrics) reads it at scrape time; an admission controller
 * implements it (types only here, so admission imports nothing of metrics).
 */

/** One band (a priority, or a named class) of an admission controller, as of now. */
export interface AdmissionBandStats {
  /** The band's label value (a priority as a decimal string, or a name). */
  readonly band: string;
  /** Requests waiting in the band's queue now. */
  readonly queueLength: number;
  /** How long the oldest waiter of the band has waited, ms; 0 when the queue is empty. */
  readonly oldestWaitMs: number;
  /** Requests admitted since start (monotonic). */
  readonly admitted: number;
  /** Requests rejected since start, by reason (each monotonic), e.g. `{ queue_full: 3, timeout: 1 }`. */
  readonly rejected: Readonly<Record<string, number>>;
}

/** Implemented by an admission controller that metrics can scrape. */
export interface AdmissionStats {
  /** A snapshot of every band (called once per scrape, off the request path). */
  admissionStats(): readonly AdmissionBandStats[];
}
