/**
 * The TCP proxy's families (registered when collectMetrics is given the
 * proxy's counters): accepted, refused, active and open connections,
 * bytes, idle timeouts, connections lost with a worker thread, and the
 * connection-duration histogram — every figure read from the shared
 * ProxyCounters, every worker's row.
 * @internal
 */
import { DURATION_BUCKETS_SECONDS, ProxyCounter, REFUSAL_REASONS, type ProxyCounters } from '../../proxy/counters.js';
import type { Family } from '../family.js';

const W = ['worker'] as const;

/** A counter or gauge with one series per proxy worker (row). */
function perWorker(
  name: string,
  help: string,
  kind: 'gauge' | 'counter',
  value: (p: ProxyCounters, w: number) => number,
): Family<ProxyCounters> {
  return {
    name,
    help,
    kind,
    labels: W,
    read: (push, proxy) => {
      for (let w = 0; w < proxy.workers; w++) push({ worker: String(w) }, value(proxy, w));
    },
  };
}

/** The proxy families, in exposition order. @internal */
export const PROXY_FAMILIES: readonly Family<ProxyCounters>[] = [
  perWorker('proxy_accepted_total', 'Client connections accepted, per proxy worker (the reusePort spread).', 'counter', (p, w) =>
    p.value(w, ProxyCounter.Accepted),
  ),
  {
    name: 'proxy_refused_total',
    help: 'Client connections refused, by reason.',
    kind: 'counter',
    labels: ['reason'],
    read: (push, proxy) => {
      for (const reason of REFUSAL_REASONS) push({ reason }, proxy.refusals(reason));
    },
  },
  perWorker('proxy_active_connections', 'Spliced client-backend pairs open now, per proxy worker.', 'gauge', (p, w) => p.active(w)),
  perWorker(
    'proxy_open_connections',
    'Accepted client connections not yet finished (held, reading a PROXY header, connecting or spliced), per proxy worker.',
    'gauge',
    (p, w) => p.open(w),
  ),
  {
    name: 'proxy_bytes_total',
    help: 'Bytes spliced: in = client to backend, out = backend to client.',
    kind: 'counter',
    labels: ['direction'],
    read: (push, proxy) => {
      push({ direction: 'in' }, proxy.total(ProxyCounter.BytesIn));
      push({ direction: 'out' }, proxy.total(ProxyCounter.BytesOut));
    },
  },
  {
    name: 'proxy_idle_timeouts_total',
    help: 'Spliced connections closed by the client or server inactivity timeout.',
    kind: 'counter',
    labels: [],
    read: (push, proxy) => push({}, proxy.total(ProxyCounter.IdleTimeouts)),
  },
  perWorker(
    'proxy_worker_lost_connections_total',
    'Accepted connections not yet finished when their proxy worker thread died, per worker row (the row is cumulative over restarts).',
    'counter',
    (p, w) => p.value(w, ProxyCounter.WorkerLost),
  ),
  {
    name: 'proxy_connection_duration_seconds',
    help: 'Duration of spliced client connections, accept to close (every proxy worker).',
    kind: 'histogram',
    labels: [],
    bounds: DURATION_BUCKETS_SECONDS,
    read: (push, proxy) => push({}, proxy.durationBuckets(), proxy.total(ProxyCounter.DurationSumUs) / 1e6),
  },
];
