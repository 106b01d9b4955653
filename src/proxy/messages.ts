/**
 * The protocol between a multi-worker TcpProxy's owner (proxy-workers.ts)
 * and its worker threads (proxy-worker.ts): what a worker starts with
 * (`workerData.poiseProxy`) and every message either way, all plain data
 * (structured-clonable). Stats are not messages: every figure is in the
 * shared ProxyCounters (proxy-counters.ts); only an admission gate's
 * per-thread figures are asked for.
 *
 * Owner → worker:
 * - `{ type: 'admission', id }` → `{ type: 'admission', id, admission }`:
 *   the worker's AdmissionGate figures (undefined without bands); also the
 *   round trip that tells a message sent before it has been handled;
 * - `{ type: 'stop' }` → `{ type: 'stopped' }` once the listening socket is closed;
 * - `{ type: 'close', drain, graceMs }` → `{ type: 'closed', cut }`;
 * - `{ type: 'events', on }` turns the forwarding of `'spliced'` / `'closed'` /
 *   `'failed'` (as `{ type: 'event', event, arg }`) on or off: on only while
 *   the owner's TcpProxy has listeners, so an unlistened proxy posts nothing
 *   per connection.
 * Worker → owner, unasked: `{ type: 'listening', address }` or
 * `{ type: 'error', message, code }` once at start.
 * @internal
 */
import type net from 'node:net';
import type { AdmissionGateOptions, AdmissionStats } from '../admission/admission.js';
import { PoiseError, type PoiseErrorCode } from '../core/errors.js';
import type { RouterAttachment, RouterOptions } from '../runtime/router.js';
import type { BandSelectorData } from './admission.js';
import type { ConnectionOptions } from './options.js';

/** What a proxy worker finds in `workerData.poiseProxy`. @internal */
export interface ProxyWorkerData {
  index: number;
  attachment: RouterAttachment;
  router: Pick<RouterOptions, 'policy'>;
  connection: ConnectionOptions;
  host: string;
  port: number;
  reusePort: boolean;
  /** The ConnectionLimit's shared words and its `max` (0: no limit). */
  limit: SharedArrayBuffer;
  maxConnections: number;
  /** The proxy's ProxyCounters buffer; this worker counts into row `counterRow`. */
  counters: SharedArrayBuffer;
  counterRow: number;
  /** With admission bands: this worker's band selector and the options of its own AdmissionGate. */
  admission: WorkerAdmission | undefined;
  /** Post `'spliced'` / `'closed'` / `'failed'` to the owner (it has listeners). */
  events: boolean;
  logName: string;
  logLevel: string;
}

/** The options of each worker's AdmissionGate: plain data (no `saturation` or `clock` function). */
export type AdmissionGateData = Omit<AdmissionGateOptions, 'saturation' | 'clock'>;

/** What a worker needs to admit by band. @internal */
export interface WorkerAdmission {
  selector: BandSelectorData;
  gate: AdmissionGateData;
}

/** The events a worker forwards. @internal */
export type ProxyEventName = 'spliced' | 'closed' | 'failed';

/** A `'failed'` error as plain data (a class does not survive postMessage). @internal */
export interface ErrorData {
  poise: boolean;
  code: string | undefined;
  message: string;
  field: string | undefined;
  cause: { code: string | undefined; message: string } | undefined;
}

/** Owner → worker. @internal */
export type OwnerMessage =
  | { type: 'admission'; id: number }
  | { type: 'stop' }
  | { type: 'close'; drain: boolean; graceMs?: number }
  | { type: 'events'; on: boolean };
/** Worker → owner. @internal */
export type WorkerMessage =
  | { type: 'listening'; address: net.AddressInfo }
  | { type: 'error'; message: string; code: string | undefined }
  | { type: 'admission'; id: number; admission: AdmissionStats | undefined }
  | { type: 'stopped' }
  | { type: 'closed'; cut: number }
  | { type: 'event'; event: 'spliced' | 'closed'; arg: string }
  | { type: 'event'; event: 'failed'; arg: ErrorData };

/** The error of a `'failed'` event as data (worker side). @internal */
export function errorData(err: unknown): ErrorData {
  const e = err as { code?: unknown; message?: unknown; field?: unknown; cause?: unknown } | undefined;
  const cause = e?.cause as { code?: unknown; message?: unknown } | undefined;
  return {
    poise: err instanceof PoiseError,
    code: typeof e?.code === 'string' ? e.code : undefined,
    message: typeof e?.message === 'string' ? e.message : String(err),
    field: typeof e?.field === 'string' ? e.field : undefined,
    cause:
      cause === undefined || cause === null
        ? undefined
        : { code: typeof cause.code === 'string' ? cause.code : undefined, message: String(cause.message ?? cause) },
  };
}

/** The owner-side error of a forwarded `'failed'` event: a PoiseError again when it was one (code, message, field, cause's code). @internal */
export function errorFromData(d: ErrorData): Error {
  const cause = d.cause === undefined ? undefined : Object.assign(new Error(d.cause.message), { code: d.cause.code });
  if (d.poise && d.code !== undefined)
    return new PoiseError(d.code as PoiseErrorCode, d.message, {
      ...(d.field === undefined ? {} : { field: d.field }),
      ...(cause === undefined ? {} : { cause }),
    });
  return Object.assign(new Error(d.message, cause === undefined ? undefined : { cause }), { code: d.code });
}
