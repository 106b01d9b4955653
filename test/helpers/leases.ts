/** Lease counts of a Balancer's table, for tests that count what routed connections hold. */
import type { Balancer } from '../../src/runtime/balancer.js';
import { until } from './until.js';

/** Every slot's connection leases, summed over all threads. */
export function openLeases(balancer: Balancer): number {
  let sum = 0;
  for (let s = 0; s < balancer.table.capacity; s++) sum += balancer.table.connections(s);
  return sum;
}

/**
 * Waits until no connection lease is open and returns the count then (0, or
 * what was left at the deadline). A pool's `end()` resolves once it has
 * ended its clients, before their sockets closed; leases come back on close.
 */
export async function leasesBack(balancer: Balancer, deadlineMs = 10_000): Promise<number> {
  // A timeout is not thrown here: the caller asserts the count left, which says more than "timed out".
  await until(() => openLeases(balancer) === 0, 'every connection lease back', deadlineMs).catch(() => undefined);
  return openLeases(balancer);
}
