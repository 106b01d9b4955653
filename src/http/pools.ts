/**
 * BackendPools: one keep-alive undici dispatcher (a `Pool` by default) per
 * backend, created on the backend's first request and closed when it leaves
 * the membership or its address changes.
 *
 * Pools are keyed by backend id and remember the address they were made
 * for: a lease whose backend now has another address (the id's slot was
 * reused, or its spec changed) retires the old pool at once; a backend that
 * left is found by {@link BackendPools.sweep}, which the dispatcher runs
 * when its router's membership version moves. A retired pool is closed
 * gracefully: requests already on it finish.
 *
 * A backend with a logical host name (spec `hostname`, a DNS-discovered
 * one) gets a pool whose origin is that name: undici sends it as the `Host`
 * header and, for https:, as the TLS `servername` (unless `pool.connect`
 * names one); its socket opens through src/outbound/dial.ts's lookup, which
 * answers the spec's own addresses (both families, Happy Eyeballs), so no
 * DNS query is made per connection. With a `pool.connect` function of the
 * caller's, the pool's origin stays the address.
 */
import { PoiseError } from '../core/errors.js';
import type { ResolvedBackendSpec } from '../core/spec.js';
import { dialExtras } from '../outbound/dial.js';
import type { Router } from '../runtime/router.js';

/** What the dispatcher needs of a per-backend dispatcher (an undici `Pool`, `Client`, or anything of that shape). */
export interface BackendDispatcher {
  dispatch(options: object, handler: object): boolean;
  close(): Promise<void>;
  destroy(err?: Error | null): Promise<void>;
  on(event: string, listener: (...args: never[]) => void): unknown;
}

/** Makes the dispatcher of one backend origin (`http://127.0.0.1:7001`); undici's `Agent` factory shape. */
export type PoolFactory = (origin: string, options: Record<string, unknown>) => BackendDispatcher;

/** Events of a backend dispatcher the dispatcher re-emits as its own (as undici's `Agent` does). */
export const FORWARDED_EVENTS = ['connect', 'disconnect', 'connectionError', 'drain'] as const;

/** What a backend's pool is made for: its address, and its host name and second IP when it has them (a change of any makes a new pool). */
function poolKey(spec: Readonly<ResolvedBackendSpec>): string {
  if (spec.hostname === '' && spec.fallbackIp === '') return spec.address;
  // A discovered backend's key is built once per spec (specs are frozen, one per membership), not per request.
  let key = POOL_KEYS.get(spec);
  if (key === undefined) {
    key = `${spec.address} ${spec.fallbackIp} ${spec.hostname}`;
    POOL_KEYS.set(spec, key);
  }
  return key;
}
const POOL_KEYS = new WeakMap<object, string>();

interface Entry {
  /** The pool's key ({@link poolKey}). */
  address: string;
  pool: BackendDispatcher;
}

/** The per-backend pools of one dispatcher (its thread only). */
export class BackendPools {
  private readonly scheme: string;
  private readonly factory: PoolFactory;
  /** The caller's `pool.connect.servername`: a backend's host name does not replace it. */
  private readonly servernameGiven: boolean;
  private readonly options: Record<string, unknown>;
  private readonly forward: (event: string, args: unknown[]) => void;
  private readonly byId = new Map<string, Entry>();
  /** Pools closing gracefully, and the promises of their close. */
  private readonly retiring = new Map<BackendDispatcher, Promise<void>>();
  private closed = false;

  constructor(
    scheme: string,
    factory: PoolFactory,
    options: Record<string, unknown>,
    forward: (event: string, args: unknown[]) => void,
    servernameGiven = false,
  ) {
    this.scheme = scheme;
    this.servernameGiven = servernameGiven;
    this.factory = factory;
    this.options = options;
    this.forward = forward;
  }

  /** Pools open now. */
  get size(): number {
    return this.byId.size;
  }

  /** The pool of backend `id` at `host:port` (`address` as the spec spells it), made on first use. */
  get(id: string, address: string, host: string, port: number, spec?: Readonly<ResolvedBackendSpec>): BackendDispatcher {
    const e = this.byId.get(id);
    const key = spec === undefined ? address : poolKey(spec);
    if (e !== undefined && e.address === key) return e.pool;
    if (this.closed) throw new PoiseError('Closed', `dispatch: the dispatcher is closed (no new pool for backend ${id})`);
    if (e !== undefined) this.retire(id, e);
    const extras = spec === undefined || typeof this.options['connect'] === 'function' ? undefined : dialExtras(spec);
    let origin = `${this.scheme}//${host.includes(':') ? `[${host}]` : host}:${port}`;
    let options = this.options;
    if (extras !== undefined) {
      origin = `${this.scheme}//${extras.host}:${port}`;
      const { host: _name, ...dial } = extras;
      const connect: Record<string, unknown> = { ...(options['connect'] as Record<string, unknown> | undefined), ...dial };
      if (this.scheme === 'https:' && spec!.hostname !== '' && !this.servernameGiven) connect['servername'] = spec!.hostname;
      options = { ...options, connect };
    }
    const pool = this.factory(origin, options);
    for (const event of FORWARDED_EVENTS) pool.on(event, (...args: never[]) => this.forward(event, args));
    this.byId.set(id, { address: key, pool });
    return pool;
  }

  /** Retires the pool of every backend the router's view no longer lists, or lists at another address. */
  sweep(router: Router): void {
    for (const [id, e] of this.byId) {
      const spec = router.member(id);
      if (spec === undefined || poolKey(spec) !== e.address) this.retire(id, e);
    }
  }

  /** Closes every pool gracefully (requests on them finish) and waits for the retired ones too. */
  async close(): Promise<void> {
    this.closed = true;
    for (const [id, e] of this.byId) this.retire(id, e);
    while (this.retiring.size > 0) await Promise.all(this.retiring.values());
  }

  /** Destroys every pool, the closing ones too (requests on them fail with `err`). */
  async destroy(err: Error | null): Promise<void> {
    this.closed = true;
    const pools = [...[...this.byId.values()].map((e) => e.pool), ...this.retiring.keys()];
    this.byId.clear();
    await Promise.all(pools.map((p) => p.destroy(err).catch(() => {})));
    await Promise.all(this.retiring.values());
  }

  private retire(id: string, e: Entry): void {
    this.byId.delete(id);
    const pool = e.pool;
    const forget = (): void => {
      this.retiring.delete(pool);
    };
    this.retiring.set(pool, pool.close().then(forget, forget));
  }
}
