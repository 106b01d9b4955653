/**
 * The backend side of the `probe` policy: an `http.Server` request-listener
 * middleware that counts the requests in flight, keeps a latency estimate,
 * answers the probe path and adds the `poise-load` report header
 * (core/probe-report.ts) to ordinary responses, so a busy backend reports
 * its load for free. No dependency: `node:http` types only.
 *
 * In flight: a request counts from its arrival until its response finishes
 * or its connection closes, whichever comes first (exactly once). Probe
 * requests are answered at once and never counted. The latency estimate is
 * an EWMA of the time from arrival to the response's end, over successful
 * and failed responses alike (a fast-failing server reports a low latency:
 * the client side guards against that with its own failure words).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { checkOptionKeys, invalidConfig } from '../core/errors.js';
import { PROBE_REPORT_HEADER, formatProbeReport } from '../core/probe-report.js';
import { numberIn } from '../core/validate.js';

/** Options of {@link createProbeServer}. */
export interface ProbeServerOptions {
  /** The probe path (exact match of the request's path, query ignored); default `/poise/probe`. */
  path?: string;
  /** Add the `poise-load` header to ordinary responses; default true. */
  reportOnResponses?: boolean;
  /** The latency EWMA's weight of each new sample, in (0, 1]; default 0.1. */
  alpha?: number;
  /** The clock, ms (fractional); default `performance.now`. */
  now?: () => number;
}

/** A request listener (`http.createServer(listener)`). */
export type RequestListener = (req: IncomingMessage, res: ServerResponse) => void;

/** The middleware: its figures, the connect-style handler and a listener wrapper. */
export interface ProbeServer {
  /** Requests in flight now (probes not counted). */
  readonly inflight: number;
  /** The latency estimate, µs (0 before the first response). */
  readonly latencyUs: number;
  /** Probe requests answered. */
  readonly probes: number;
  /**
   * Connect / Express style: answers a probe and returns, or counts the
   * request, sets the header and calls `next()`.
   */
  handle(req: IncomingMessage, res: ServerResponse, next: () => void): void;
  /** An `http.Server` listener that runs `listener` behind this middleware. */
  wrap(listener: RequestListener): RequestListener;
}

/** Validated options. */
function resolve(o: ProbeServerOptions): Required<ProbeServerOptions> {
  if (typeof o !== 'object' || o === null) invalidConfig('options', 'must be an object', o);
  checkOptionKeys(o, ['path', 'reportOnResponses', 'alpha', 'now']);
  const path = o.path ?? '/poise/probe';
  if (typeof path !== 'string' || !/^\/[\x21-\x7e]*$/.test(path) || path.includes('?') || path.length > 1024)
    invalidConfig('options.path', 'must be a path starting with "/" (printable ASCII, no spaces, no query)', path);
  const report = o.reportOnResponses ?? true;
  if (typeof report !== 'boolean') invalidConfig('options.reportOnResponses', 'must be a boolean', report);
  if (o.now !== undefined && typeof o.now !== 'function') invalidConfig('options.now', 'must be a function returning milliseconds', o.now);
  return {
    path,
    reportOnResponses: report,
    alpha: numberIn(o.alpha ?? 0.1, 'options.alpha', Number.MIN_VALUE, 1),
    now: o.now ?? (() => performance.now()),
  };
}

/** Whether `url` is `path`, with or without a query. */
function isProbe(url: string | undefined, path: string): boolean {
  if (url === undefined || !url.startsWith(path)) return false;
  return url.length === path.length || url.charCodeAt(path.length) === 0x3f;
}

/**
 * Makes the backend-side middleware.
 *
 * @example
 * const probes = createProbeServer();
 * http.createServer(probes.wrap((req, res) => res.end('ok'))).listen(8080);
 */
export function createProbeServer(options: ProbeServerOptions = {}): ProbeServer {
  const o = resolve(options);
  let inflight = 0;
  let latencyUs = 0;
  let probes = 0;
  const handle = (req: IncomingMessage, res: ServerResponse, next: () => void): void => {
    if (isProbe(req.url, o.path)) {
      probes++;
      const text = formatProbeReport(inflight, latencyUs);
      res.writeHead(200, { [PROBE_REPORT_HEADER]: text, 'content-type': 'text/plain', 'cache-control': 'no-store' });
      res.end(text);
      return;
    }
    inflight++;
    const start = o.now();
    let done = false;
    const end = (): void => {
      if (done) return;
      done = true;
      inflight--;
      const us = (o.now() - start) * 1000;
      latencyUs = latencyUs === 0 ? us : latencyUs + o.alpha * (us - latencyUs);
    };
    res.once('finish', end);
    res.once('close', end);
    if (o.reportOnResponses) res.setHeader(PROBE_REPORT_HEADER, formatProbeReport(inflight, latencyUs));
    next();
  };
  return {
    get inflight() {
      return inflight;
    },
    get latencyUs() {
      return latencyUs;
    },
    get probes() {
      return probes;
    },
    handle,
    wrap: (listener) => (req, res) => handle(req, res, () => listener(req, res)),
  };
}
