/**
 * A PoiseDispatcher over `n` loopback HTTP backends (test/helpers/http-backends)
 * with its Balancer and HttpCounters, for the HTTP dispatcher tests. What it
 * opens goes into `cleanups` (closed by the test's afterEach).
 */
import { PoiseDispatcher, type PoiseDispatcherOptions } from '../../src/http/dispatcher.js';
import { HttpCounters } from '../../src/http/counters.js';
import { createLogger } from '../../src/log.js';
import { Balancer } from '../../src/runtime/balancer.js';
import type { RouterOptions } from '../../src/runtime/router.js';
import { fleet, type Fleet } from './http-backends.js';

export interface HttpRig {
  fleet: Fleet;
  balancer: Balancer;
  dispatcher: PoiseDispatcher;
  counters: HttpCounters;
  /** Request leases open in the table, every slot. */
  inFlight(): number;
}

export async function httpRig(
  cleanups: Array<() => Promise<unknown>>,
  n: number,
  routerOpts: RouterOptions,
  opts: Partial<PoiseDispatcherOptions>,
): Promise<HttpRig> {
  const f = await fleet(n);
  cleanups.push(() => f.close());
  const balancer = new Balancer({ logger: createLogger({ level: 'silent' }) });
  balancer.update(f.specs());
  const counters = HttpCounters.create({ capacity: balancer.table.capacity });
  const dispatcher = new PoiseDispatcher({ router: balancer.router(routerOpts), origin: 'http://api', counters, ...opts });
  cleanups.push(() => dispatcher.destroy());
  const inFlight = (): number => {
    let sum = 0;
    for (let s = 0; s < balancer.table.capacity; s++) sum += balancer.table.requests(s);
    return sum;
  };
  return { fleet: f, balancer, dispatcher, counters, inFlight };
}

/** The slot of backend `id`. */
export function slotOf(b: Balancer, id: string): number {
  const e = b.slotEntries().find((x) => x.id === id);
  if (e === undefined) throw new Error(`no backend ${id}`);
  return e.slot;
}
