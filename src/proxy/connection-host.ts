/**
 * What a proxied connection needs from the proxy that accepted it (its
 * router, settings, counters, timeout wheel, rate-limited warnings, socket
 * tracking), built once per listener.
 */
import type net from 'node:net';
import { rateLimited, type Logger, type RateLimitedLogger } from '../log.js';
import { KEYED_POLICY_NAMES } from '../runtime/policies.js';
import type { Router } from '../runtime/router.js';
import type { ProxyBandSelector } from './admission.js';
import type { ProxyCounters } from './counters.js';
import type { ConnectionOptions, ConnectionSettings } from './options.js';
import { TimeoutWheel } from './timeout-wheel.js';

/** What a connection needs from the proxy that accepted it. @internal */
export interface ConnectionHost {
  readonly router: Router;
  /** `settings.key` when the router's policy hashes a key (rendezvous, maglev, ring-hash); undefined otherwise: no key is computed. */
  readonly key: ConnectionOptions['key'];
  /** The admission band of each client (proxy-admission.ts); undefined: no admission. */
  readonly admission?: ProxyBandSelector | undefined;
  readonly settings: ConnectionSettings;
  readonly log: Logger;
  /** Per-connection warnings, rate-limited (one line, then a count per window). */
  readonly warn: RateLimitedLogger;
  /** The shared counters (metrics) and this proxy's row in them. */
  readonly counters: ProxyCounters;
  readonly worker: number;
  /** Client and server inactivity timers; undefined when both timeouts are 0 and no PROXY header is expected. */
  readonly wheel: TimeoutWheel | undefined;
  /** The clock of a turn's latency: `settings.timers`' when given, else undefined (`performance.now()`, called directly). */
  readonly turnClock: (() => number) | undefined;
  /** Tracks a socket so that closing the proxy can destroy it. */
  track(socket: net.Socket): void;
  /** Forgets a tracked socket once it closed (the connection's own 'close' listeners call it: one listener per socket, not two). */
  untrack(socket: net.Socket): void;
  /** `'spliced'` / `'closed'` with the backend id, `'failed'` with the error. */
  emit(event: 'spliced' | 'closed' | 'failed', arg: unknown): void;
  /** Called once per connection when both of its sockets are closed (frees its `--max-connections` slot). */
  finished(): void;
}

/** Builds a host for {@link serveConnection} (one wheel and one rate limiter per proxy). @internal */
export function connectionHost(
  settings: ConnectionSettings,
  parts: Pick<ConnectionHost, 'router' | 'admission' | 'log' | 'counters' | 'worker' | 'track' | 'untrack' | 'emit' | 'finished'>,
): ConnectionHost {
  const timeouts = [settings.clientTimeoutMs, settings.serverTimeoutMs, settings.acceptProxy ? settings.acceptProxyTimeoutMs : 0].filter(
    (t) => t > 0,
  );
  // A tick of 1/20 of the shortest timeout, within [5 ms, 1 s].
  const wheel =
    timeouts.length === 0
      ? undefined
      : new TimeoutWheel({ tickMs: Math.min(1000, Math.max(5, Math.floor(Math.min(...timeouts) / 20))), timers: settings.timers });
  // A key only matters to a keyed policy: any other never reads it, so no connection computes one.
  const policy = (parts.router as { policyName?: unknown }).policyName;
  const keyed = typeof policy !== 'string' || (KEYED_POLICY_NAMES as readonly string[]).includes(policy);
  const turnClock = settings.timers === undefined ? undefined : () => settings.timers!.now();
  return { ...parts, settings, key: keyed ? settings.key : undefined, wheel, turnClock, warn: rateLimited(parts.log) };
}
