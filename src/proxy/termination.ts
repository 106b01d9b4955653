/**
 * How a proxied connection ended: HAProxy's two-letter termination states
 * (the access log's `termination` and `state`), and the classification of a
 * refusal — a client no backend was spliced for — by the code of what
 * refused it (outbound/retry-run.ts's `reason`, or the admission gate's
 * error): one table, no inspection of an error's `cause` or message.
 */
import type { PoiseErrorCode } from '../core/errors.js';
import type { RefusalReason } from './counters.js';

/** Why a connection ended (the access log's `termination`), with HAProxy's two-letter state. */
export const TERMINATIONS = {
  /** The client finished first (FIN), then the backend: a normal end. */
  'client-close': '--',
  /** The backend finished first, then the client: a normal end. */
  'server-close': '--',
  /** The client reset or failed mid-stream. */
  'client-error': 'CD',
  /** The backend reset or failed mid-stream. */
  'server-error': 'SD',
  'client-timeout': 'cD',
  'server-timeout': 'sD',
  /** Every attempt's connect timed out. */
  'connect-timeout': 'sC',
  /** No backend accepted (refused, unreachable, none eligible). */
  'connect-failed': 'SC',
  /** The client left before a backend connected. */
  'client-abort': 'CC',
  /** This host ran out of a resource (EMFILE, ENFILE, ENOBUFS, ...). */
  'local-error': 'RC',
  /** A malformed PROXY header (accept-proxy). */
  'proxy-header': 'PR',
  /** No complete PROXY header in time. */
  'proxy-header-timeout': 'cR',
  /** Closed by the proxy itself (close() without drain). */
  shutdown: 'KD',
  /** An internal error on this connection's path closed it (and only it). */
  'internal-error': 'PD',
} as const;
/** A termination cause. */
export type Termination = keyof typeof TERMINATIONS;

/** The termination of a refused client: `local-error` for this host's resources, `connect-timeout` when the last connect timed out, else `connect-failed`. */
export function refusalTermination(reason: PoiseErrorCode | undefined): Termination {
  return reason === 'LocalResource' ? 'local-error' : reason === 'ConnectTimeout' ? 'connect-timeout' : 'connect-failed';
}

/**
 * The metrics reason of a refusal: this host's resources are `local_error`;
 * admission's full queue is the connection limit; its wait and a connect
 * timeout are timeouts; anything else found no backend.
 */
export function refusalReason(reason: PoiseErrorCode | undefined): RefusalReason {
  switch (reason) {
    case 'LocalResource':
      return 'local_error';
    case 'QueueFull':
      return 'max_connections';
    case 'QueueTimeout':
    case 'ConnectTimeout':
      return 'timeout';
    default:
      return 'no_backend';
  }
}
