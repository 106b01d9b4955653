/**
 * The caller's handler, whichever of undici's two handler APIs it speaks.
 *
 * undici 7 and 8 drive handlers with `onRequestStart` / `onResponseStart` /
 * `onResponseData` / `onResponseEnd` / `onResponseError` and a controller
 * (pause, resume, abort). undici 7's own `fetch` and `request`, and the
 * `fetch` built into Node 20 and 24, still hand a dispatcher the older form
 * (`onConnect`, `onHeaders`, `onData`, `onComplete`, `onError`), which
 * undici 8's pools no longer accept. The dispatcher always talks the new
 * API to its pools and speaks to the caller through a {@link Sink}: a
 * pass-through for a new-API handler, a translation for an old one.
 */
import type { Duplex } from 'node:stream';

/** The controller undici hands a new-API handler. */
export interface DispatchController {
  readonly aborted: boolean;
  readonly paused: boolean;
  readonly reason: Error | null;
  /** Raw response headers (name, value, ...), where undici keeps them. */
  readonly rawHeaders?: unknown;
  /** Raw trailers, where undici keeps them. */
  readonly rawTrailers?: unknown;
  abort(reason?: Error): void;
  pause(): void;
  resume(): void;
}

/** Parsed headers as undici hands them to a new-API handler. */
export type Headers = Record<string, string | string[] | undefined>;

/** undici's new handler API (7 and 8). */
export interface ModernHandler {
  onRequestStart?(controller: DispatchController, context: unknown): void;
  onRequestUpgrade?(controller: DispatchController, statusCode: number, headers: Headers, socket: Duplex): void;
  onResponseStart?(controller: DispatchController, statusCode: number, headers: Headers, statusMessage?: string): void;
  onResponseData?(controller: DispatchController, chunk: Buffer): void;
  onResponseEnd?(controller: DispatchController, trailers: Headers): void;
  onResponseError?(controller: DispatchController | null, error: Error): void;
  onResponseStarted?(): void;
  onBodySent?(chunk: unknown): void;
  onRequestSent?(): void;
}

/** undici's older handler API (what undici 7's `fetch` and `request`, and Node's built-in `fetch`, pass). */
export interface LegacyHandler {
  onConnect?(abort: (reason?: Error) => void, context?: unknown): void;
  onUpgrade?(statusCode: number, rawHeaders: unknown, socket: Duplex): void;
  onHeaders?(statusCode: number, rawHeaders: unknown, resume: () => void, statusText?: string): boolean | undefined;
  onData?(chunk: Buffer): boolean | undefined;
  onComplete?(rawTrailers: unknown): void;
  onError?(error: Error): void;
  onResponseStarted?(): void;
  onBodySent?(chunk: unknown): void;
  onRequestSent?(): void;
}

/** The caller's handler as the dispatcher drives it. */
export interface Sink {
  /** The caller speaks the older API (it wants raw headers). */
  readonly legacy: boolean;
  start(controller: DispatchController): void;
  upgrade(controller: DispatchController, statusCode: number, headers: Headers, socket: Duplex): void;
  responseStarted(): void;
  headers(controller: DispatchController, statusCode: number, headers: Headers, statusMessage: string | undefined): void;
  data(controller: DispatchController, chunk: Buffer): void;
  end(controller: DispatchController, trailers: Headers): void;
  error(controller: DispatchController | null, error: Error): void;
  bodySent(chunk: unknown): void;
  requestSent(): void;
}

/** The sink for `handler`: new API when it has `onRequestStart` (undici's own test), else the older one. */
export function toSink(handler: object): Sink {
  return typeof (handler as ModernHandler).onRequestStart === 'function'
    ? new ModernSink(handler as ModernHandler)
    : new LegacySink(handler as LegacyHandler);
}

class ModernSink implements Sink {
  readonly legacy = false;
  private readonly h: ModernHandler;
  constructor(h: ModernHandler) {
    this.h = h;
  }
  start(c: DispatchController): void {
    this.h.onRequestStart?.(c, null);
  }
  upgrade(c: DispatchController, statusCode: number, headers: Headers, socket: Duplex): void {
    this.h.onRequestUpgrade?.(c, statusCode, headers, socket);
  }
  responseStarted(): void {
    this.h.onResponseStarted?.();
  }
  headers(c: DispatchController, statusCode: number, headers: Headers, statusMessage: string | undefined): void {
    this.h.onResponseStart?.(c, statusCode, headers, statusMessage);
  }
  data(c: DispatchController, chunk: Buffer): void {
    this.h.onResponseData?.(c, chunk);
  }
  end(c: DispatchController, trailers: Headers): void {
    this.h.onResponseEnd?.(c, trailers);
  }
  error(c: DispatchController | null, error: Error): void {
    if (typeof this.h.onResponseError !== 'function') throw error;
    this.h.onResponseError(c, error);
  }
  bodySent(chunk: unknown): void {
    this.h.onBodySent?.(chunk);
  }
  requestSent(): void {
    this.h.onRequestSent?.();
  }
}

class LegacySink implements Sink {
  readonly legacy = true;
  private readonly h: LegacyHandler;
  private controller: DispatchController | undefined;
  private readonly resumeFn = (): void => this.controller?.resume();

  constructor(h: LegacyHandler) {
    this.h = h;
  }
  start(c: DispatchController): void {
    this.controller = c;
    this.h.onConnect?.((reason?: Error) => c.abort(reason));
  }
  upgrade(c: DispatchController, statusCode: number, headers: Headers, socket: Duplex): void {
    this.h.onUpgrade?.(statusCode, rawOf(c.rawHeaders, headers), socket);
  }
  responseStarted(): void {
    this.h.onResponseStarted?.();
  }
  headers(c: DispatchController, statusCode: number, headers: Headers, statusMessage: string | undefined): void {
    if (this.h.onHeaders?.(statusCode, rawOf(c.rawHeaders, headers), this.resumeFn, statusMessage) === false) c.pause();
  }
  data(c: DispatchController, chunk: Buffer): void {
    if (this.h.onData?.(chunk) === false) c.pause();
  }
  end(c: DispatchController, trailers: Headers): void {
    this.h.onComplete?.(rawOf(c.rawTrailers, trailers));
  }
  error(_c: DispatchController | null, error: Error): void {
    if (typeof this.h.onError !== 'function') throw error;
    this.h.onError(error);
  }
  bodySent(chunk: unknown): void {
    this.h.onBodySent?.(chunk);
  }
  requestSent(): void {
    this.h.onRequestSent?.();
  }
}

/**
 * Raw headers for an old-API handler: the pool's own raw list when its
 * controller kept one (undici 7 and 8 do), else built from the parsed
 * object as a flat [name, value, name, value, ...] list of latin1 Buffers.
 */
function rawOf(raw: unknown, parsed: Headers | null | undefined): unknown {
  if (Array.isArray(raw)) return raw;
  const out: Buffer[] = [];
  if (parsed === null || parsed === undefined) return out;
  for (const name of Object.keys(parsed)) {
    const v = parsed[name];
    if (v === undefined) continue;
    for (const one of Array.isArray(v) ? v : [v]) out.push(Buffer.from(name, 'latin1'), Buffer.from(one, 'latin1'));
  }
  return out;
}
