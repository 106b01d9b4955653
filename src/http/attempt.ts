/**
 * The attempts of a routed request: the handlers a backend's pool drives,
 * each holding one request lease until it ends (split from request.ts,
 * which drives them).
 */
import type { Duplex } from 'node:stream';
import type { Lease } from '../runtime/lease.js';
import { outcomeCode } from './counters.js';
import type { AttemptOutcome } from './outcome.js';
import type { AttemptControl, DispatchCore, RoutedRequest } from './request.js';
import type { DispatchController, Headers } from './sink.js';

/**
 * One attempt: the handler the backend's pool drives, holding the attempt's
 * lease until {@link AttemptBase.end}. Two shapes, by the API the pool and
 * the caller speak: {@link Attempt} (undici's new API, any pool) and
 * {@link LegacyAttempt} (the older API, which undici 7's pools run
 * natively: no header object is built for a caller that wants raw headers).
 * @internal
 */
export abstract class AttemptBase {
  readonly lease: Lease;
  /** Clock reading when the attempt was sent. */
  readonly startedAt: number;
  /** Latency to response headers, ms; -1 until they came. */
  latencyMs = -1;
  /** The outcome of the response (by its status); a `success` until one came. */
  outcome: AttemptOutcome = 'success';
  /** The pool started sending it (`onRequestStart` / `onConnect`): bytes may have left. */
  started = false;
  /** Its controller, once the pool started it (null before, and after its error). */
  control: AttemptControl | null = null;
  /** Sent as a hedge (http/hedge.ts) beside an attempt still in flight. */
  hedge = false;
  protected readonly req: RoutedRequest;
  private readonly core: DispatchCore;
  private ended = false;

  constructor(req: RoutedRequest, core: DispatchCore, lease: Lease, startedAt: number) {
    this.req = req;
    this.core = core;
    this.lease = lease;
    this.startedAt = startedAt;
  }

  /** Releases the lease once, counting the outcome (and the latency, when headers came) unless `count` is false. */
  end(outcome: AttemptOutcome, count = true): void {
    if (this.ended) return;
    this.ended = true;
    const core = this.core;
    const lease = this.lease;
    if (count) core.counters?.record(lease.slot, lease.generation, outcomeCode(outcome), this.latencyMs);
    if (outcome === 'success' && this.latencyMs >= 0) {
      core.release.latencyMs = this.latencyMs;
      lease.release('success', core.release);
    } else {
      lease.release(outcome);
    }
  }
}

/** An attempt in undici's new handler API (any pool of undici 7 or 8). @internal */
export class Attempt extends AttemptBase {
  onRequestStart(controller: DispatchController, _context: unknown): void {
    this.started = true;
    this.req.onStart(this, controller);
  }
  onResponseStarted(): void {
    this.req.onResponseStarted(this);
  }
  onResponseStart(_controller: DispatchController, statusCode: number, headers: Headers, statusMessage?: string): void {
    this.req.onHeaders(this, statusCode, headers, statusMessage);
  }
  onResponseData(_controller: DispatchController, chunk: Buffer): void {
    this.req.onData(this, chunk);
  }
  onResponseEnd(_controller: DispatchController, trailers: Headers): void {
    this.req.onEnd(this, trailers);
  }
  onResponseError(_controller: DispatchController | null, err: Error): void {
    this.req.onError(this, err);
  }
  onRequestUpgrade(_controller: DispatchController, statusCode: number, headers: Headers, socket: Duplex): void {
    this.req.onUpgrade(this, statusCode, headers, socket);
  }
  onBodySent(chunk: unknown): void {
    this.req.onBodySent(this, chunk);
  }
  onRequestSent(): void {
    this.req.onRequestSent(this);
  }
}

/** No parsed headers: a legacy attempt hands its caller the raw ones (through `rawHeaders`). */
const RAW_ONLY: Headers = Object.freeze({}) as Headers;

/**
 * An attempt in undici's older handler API, for a caller that speaks it on a
 * pool that runs it natively (undici 7): the raw headers and trailers pass
 * through untouched. It is also the attempt's controller (the older API has
 * none): pause and resume work through onHeaders / onData return values and
 * the resume callback, abort through the function `onConnect` gave.
 * @internal
 */
export class LegacyAttempt extends AttemptBase implements AttemptControl {
  private abortFn: ((reason?: Error) => void) | undefined;
  private resumeFn: (() => void) | undefined;
  private isPaused = false;
  rawHeaders: unknown = null;
  rawTrailers: unknown = null;

  abort(reason?: Error): void {
    // undici's abort function ignores a request already aborted or complete.
    this.abortFn?.(reason);
  }
  pause(): void {
    this.isPaused = true;
  }
  resume(): void {
    if (!this.isPaused) return;
    this.isPaused = false;
    this.resumeFn?.();
  }

  onConnect(abort: (reason?: Error) => void, _context?: unknown): void {
    this.started = true;
    this.abortFn = abort;
    this.req.onStart(this, this);
  }
  onResponseStarted(): void {
    this.req.onResponseStarted(this);
  }
  onHeaders(statusCode: number, rawHeaders: unknown, resume: () => void, statusText?: string): boolean {
    this.resumeFn = resume;
    this.rawHeaders = rawHeaders;
    this.req.onHeaders(this, statusCode, RAW_ONLY, statusText);
    return !this.isPaused;
  }
  onData(chunk: Buffer): boolean {
    this.req.onData(this, chunk);
    return !this.isPaused;
  }
  onComplete(rawTrailers: unknown): void {
    this.rawTrailers = rawTrailers;
    this.req.onEnd(this, RAW_ONLY);
  }
  onError(err: Error): void {
    this.req.onError(this, err);
  }
  onUpgrade(statusCode: number, rawHeaders: unknown, socket: Duplex): void {
    this.rawHeaders = rawHeaders;
    this.req.onUpgrade(this, statusCode, RAW_ONLY, socket);
  }
  onBodySent(chunk: unknown): void {
    this.req.onBodySent(this, chunk);
  }
  onRequestSent(): void {
    this.req.onRequestSent(this);
  }
}
