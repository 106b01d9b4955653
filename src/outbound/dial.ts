/**
 * What a socket to one backend is opened with, beyond `host` and `port`: a
 * backend found by DNS keeps its logical host name (spec `hostname`) and may
 * have a second address of the other IP family (spec `fallbackIp`).
 * Such a backend is dialled by its host name through a `lookup` that
 * answers the spec's own addresses (no DNS query at dial time: the
 * discovery source resolved them), with Node's `autoSelectFamily` doing
 * Happy Eyeballs (RFC 8305, gRPC A61): the first address, then the next one
 * {@link HAPPY_EYEBALLS_DELAY_MS} later while the first has not connected;
 * the first to connect is kept and the other attempt is abandoned.
 *
 * A backend with neither field dials `host:port` as it always has (no
 * lookup, nothing allocated): {@link dialExtras} answers undefined; so
 * does one whose `address` is a host name (Node resolves it as before).
 */
import type { LookupFunction } from 'node:net';
import { parseAddress } from '../core/address.js';
import { isIPv4, isIPv6 } from '../core/ip.js';
import type { ResolvedBackendSpec } from '../core/spec.js';

/** The connection-attempt delay between the two addresses of a dual-stack backend (gRPC A61, RFC 8305's recommended 250 ms). */
export const HAPPY_EYEBALLS_DELAY_MS = 250;

/** The host name a backend with a second address but no `hostname` is dialled by (RFC 6761 `.invalid`: never resolved, our lookup answers it). */
const UNNAMED = 'backend.invalid';

/** The extra socket options of a backend with a host name or a second address. */
export interface DialExtras {
  /** The name the socket is opened by (the spec's `hostname`; its `lookup` answers the addresses). */
  readonly host: string;
  readonly lookup: LookupFunction;
  readonly autoSelectFamily: true;
  readonly autoSelectFamilyAttemptTimeout: number;
}

/** Per resolved spec (frozen, so its fields never change), its extras; specs without any are not stored. */
const EXTRAS = new WeakMap<object, DialExtras>();

/** `host` (an IP, or a host name) as a lookup answer: its family 4 or 6 (0 for a name, which Node then resolves). */
function answer(host: string): { address: string; family: number } {
  return { address: host, family: isIPv6(host) ? 6 : isIPv4(host) ? 4 : 0 };
}

/**
 * The extra options to open a socket to `spec` with, or undefined when it
 * has neither a `hostname` nor a `fallbackIp` (dial `host:port` as is).
 */
export function dialExtras(spec: Readonly<ResolvedBackendSpec>): DialExtras | undefined {
  if (spec.hostname === '' && spec.fallbackIp === '') return undefined;
  let extras = EXTRAS.get(spec);
  if (extras === undefined) {
    const primary = answer(parseAddress(spec.address)?.host ?? spec.address);
    // An address given by name is dialled as it is (Node resolves it): there is no second IP to race it against.
    if (primary.family === 0) return undefined;
    const addresses = [primary];
    if (spec.fallbackIp !== '') addresses.push(answer(spec.fallbackIp));
    const first = addresses[0]!;
    const lookup = ((_name: string, options: { all?: boolean }, callback: (...args: unknown[]) => void): void => {
      if (options?.all === true) callback(null, addresses);
      else callback(null, first.address, first.family);
    }) as unknown as LookupFunction;
    extras = Object.freeze({
      host: spec.hostname === '' ? UNNAMED : spec.hostname,
      lookup,
      autoSelectFamily: true as const,
      autoSelectFamilyAttemptTimeout: HAPPY_EYEBALLS_DELAY_MS,
    });
    EXTRAS.set(spec, extras);
  }
  return extras;
}
