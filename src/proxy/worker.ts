/**
 * The thread entry of a proxy worker (started by proxy-workers.ts): attaches
 * this thread's own Router — its own policy, seeded from the OS here — to
 * the Balancer's LoadTable, and accepts on the shared port with `reusePort`
 * (Node >= 22.12; older Node runs one worker, without it), so the kernel
 * spreads connections over the workers and no thread computes a global
 * minimum. Membership changes, drain and ejection arrive through
 * the table's epochs, exactly as for any embedded router.
 *
 * The messages it answers are in proxy-messages.ts; it counts into its row
 * of the shared ProxyCounters, which the owner reads without asking.
 * @internal
 */
import { parentPort, workerData } from 'node:worker_threads';
import { AdmissionGate } from '../admission/admission.js';
import { createLogger } from '../log.js';
import { directClock } from '../runtime/clock.js';
import { Router } from '../runtime/router.js';
import { ConnectionLimit } from './connection-limit.js';
import { resolveConnectionOptions } from './options.js';
import { ProxyCounters } from './counters.js';
import { bandSelectorFrom } from './admission.js';
import { ProxyListener } from './listener.js';
import { errorData, type OwnerMessage, type ProxyEventName, type ProxyWorkerData, type WorkerMessage } from './messages.js';

const d = (workerData as { poiseProxy: ProxyWorkerData }).poiseProxy;
const port = parentPort!;
const post = (m: WorkerMessage): void => port.postMessage(m);

const log = createLogger({ name: d.logName, level: d.logLevel }).child({ worker: d.index });
// Reads per connection, not per pick: the time read directly, so no ticker wakes for this thread (clock.ts, directClock).
const router = Router.attach(d.attachment, { ...d.router, logger: log, clock: directClock(d.attachment.clock) });
// With bands, this thread's own gate over its own router: saturation is the
// pool's (LoadTable totals over every thread), the queues are this thread's.
const gate = d.admission === undefined ? undefined : new AdmissionGate(router, d.admission.gate);
let forward = d.events;
const emit = (event: ProxyEventName, arg: unknown): void => {
  if (!forward) return;
  if (event === 'failed') post({ type: 'event', event, arg: errorData(arg) });
  else post({ type: 'event', event, arg: arg as string });
};
const listener = new ProxyListener(
  resolveConnectionOptions(d.connection),
  router,
  log,
  new ConnectionLimit(d.maxConnections, d.limit, d.index),
  emit,
  d.admission === undefined ? undefined : bandSelectorFrom(d.admission.selector),
  ProxyCounters.attach(d.counters),
  d.counterRow,
);

port.on('message', (m: OwnerMessage) => {
  if (m.type === 'events') {
    forward = m.on;
    return;
  }
  if (m.type === 'admission') {
    post({ type: 'admission', id: m.id, admission: gate?.admissionStats() });
    return;
  }
  if (m.type === 'stop') {
    void listener.stopAccepting();
    post({ type: 'stopped' });
    return;
  }
  void listener.close(m).then(({ cut }) => {
    router.close();
    post({ type: 'closed', cut });
  });
});

try {
  const address = await listener.listen({ host: d.host, port: d.port, reusePort: d.reusePort });
  post({ type: 'listening', address });
} catch (err) {
  const e = err as NodeJS.ErrnoException;
  post({ type: 'error', message: e.message, code: e.code });
}
