/**
 * What an HTTP attempt's end says about its backend, and whether the
 * request may be sent again.
 *
 * - A response: 5xx is a `failure` by default (passive health and outlier
 *   detection see it; the response still goes to the caller), everything
 *   else a `success`. `statusOutcome` replaces the rule.
 * - An error: the backend's or the network's (refused, reset, unreachable,
 *   timed out, a malformed response, a TLS failure) is a `failure`; the
 *   caller's own (an abort, a bad argument, its body stream failing) and
 *   this host's resource errors (EMFILE, ENOBUFS...) are `cancelled`, so
 *   they never eject a backend.
 * - Sent again on another backend: only after a `failure` before any
 *   response byte reached the caller, and only a body that can be replayed
 *   (none, a string, bytes) — after a connect failure (nothing was sent)
 *   whatever the method, otherwise only an idempotent method. A streamed
 *   body is never sent twice.
 */
import { isLocalError } from '../outbound/retry-run.js';

/** How a lease ends. */
export type AttemptOutcome = 'success' | 'failure' | 'overload' | 'cancelled';

/** Codes of errors that are the backend's or the network's. */
const BACKEND_ERROR_CODES: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'EHOSTDOWN',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
  // undici: the other side closed, connect / headers / body timeouts, a
  // response too large for its header limits, an unexpected informational
  // reply, a response body cut short of its content-length (the backend
  // closed or reset mid-body).
  'UND_ERR_SOCKET',
  'UND_ERR_RES_CONTENT_LENGTH_MISMATCH',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'UND_ERR_HEADERS_OVERFLOW',
  'UND_ERR_INFO',
]);

/** The idempotent methods (RFC 9110 §9.2.2, without TRACE). */
const IDEMPOTENT: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);

/** The default rule for a response: 5xx `failure`, else `success`. */
export function defaultStatusOutcome(statusCode: number): AttemptOutcome {
  return statusCode >= 500 ? 'failure' : 'success';
}

/** `failure` for the backend's or the network's error, `cancelled` for the caller's or this host's. */
export function errorOutcome(err: unknown): 'failure' | 'cancelled' {
  if (isLocalError(err)) return 'cancelled';
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code !== 'string') return 'cancelled';
  if (BACKEND_ERROR_CODES.has(code)) return 'failure';
  // llhttp parse errors (a malformed response) and TLS / certificate failures.
  if (code.startsWith('HPE_') || code.startsWith('ERR_TLS_') || code.startsWith('ERR_SSL_') || code.includes('CERT')) return 'failure';
  return 'cancelled';
}

/** True for an idempotent request: undici's own `idempotent` flag when given, else the method. */
export function isIdempotent(method: unknown, idempotent: unknown): boolean {
  if (typeof idempotent === 'boolean') return idempotent;
  return typeof method === 'string' && IDEMPOTENT.has(method);
}

/** True for a body that can be sent again as it is: none, a string, or bytes. */
export function isReplayable(body: unknown): boolean {
  return body === undefined || body === null || typeof body === 'string' || ArrayBuffer.isView(body);
}
