/**
 * A checked-out mysql2 connection's lease (mysql-pool-cluster.ts): the
 * connection is wrapped once, each busy period of its commands is one
 * request on the lease (its mean per-command time the latency sample), and
 * release, destroy and a fatal error return the lease as a success, a
 * cancellation and a failure.
 */
import type { Lease } from '../runtime/lease.js';

/** What the pool cluster uses of a mysql2 core connection (`PoolConnection`). */
export interface MysqlCoreConnection {
  release(): void;
  destroy(): void;
  query(...args: unknown[]): unknown;
  execute(...args: unknown[]): unknown;
  on(event: 'error', listener: (err: Error) => void): unknown;
  promise(): unknown;
}

const LEASE = Symbol('poise.mysql.lease');
const HOOKED = Symbol('poise.mysql.hooked');
/** A connection's busy period: commands queued and not yet ended, how many it ran, since when (see {@link hook}). */
interface Busy {
  pending: number;
  commands: number;
  since: number;
}
/** A core connection as this module marks it: its lease while checked out, and whether it is wrapped. @internal */
export type Hooked = MysqlCoreConnection & { [LEASE]?: Lease; [HOOKED]?: true; _clusterId?: string };

/** Wraps a core connection's query / execute / release / destroy once; each checkout sets its lease. */
function hook(conn: Hooked): void {
  if (conn[HOOKED]) return;
  conn[HOOKED] = true;
  const { release, destroy, query, execute } = conn;
  const busy: Busy = { pending: 0, commands: 0, since: 0 };
  // mysql2 runs one command at a time per connection and queues the rest, so
  // the lease counts one request per busy period — from the first command
  // queued to the end of the last — and its latency sample is the period's
  // mean per command: a command queued behind another neither goes uncounted
  // nor ends the count while the other still runs.
  const turn =
    (run: (...args: unknown[]) => unknown) =>
    (...args: unknown[]): unknown => {
      const lease = conn[LEASE];
      if (lease === undefined) return run.apply(conn, args);
      if (busy.pending++ === 0) {
        lease.beginRequest();
        busy.commands = 0;
        busy.since = performance.now();
      }
      busy.commands++;
      const end = (): void => {
        if (busy.pending > 0 && --busy.pending === 0) lease.endRequest(Math.max(0, performance.now() - busy.since) / busy.commands);
      };
      const cmd = run.apply(conn, args) as { once?: (e: string, f: () => void) => unknown } | undefined;
      // mysql2's command emits 'end' once, on a result and on an error reply alike.
      if (typeof cmd?.once === 'function') cmd.once('end', end);
      else end();
      return cmd;
    };
  conn.query = turn(query);
  conn.execute = turn(execute);
  conn.release = () => {
    busy.pending = 0;
    conn[LEASE]?.release('success');
    conn[LEASE] = undefined;
    release.call(conn);
  };
  conn.destroy = () => {
    busy.pending = 0;
    conn[LEASE]?.release('cancelled');
    conn[LEASE] = undefined;
    destroy.call(conn);
  };
  // A fatal connection error: the node failed this lease.
  conn.on('error', () => {
    busy.pending = 0;
    conn[LEASE]?.release('failure');
    conn[LEASE] = undefined;
  });
}

/** Hands `lease` to `conn` for this checkout (wrapping the connection the first time). @internal */
export function lend(conn: Hooked, lease: Lease): void {
  hook(conn);
  conn[LEASE] = lease;
}
