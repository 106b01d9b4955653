/**
 * RedisMembership: the read side of the Redis control plane.
 *
 * Order of operations on every (re)connection of the subscriber: SUBSCRIBE
 * and wait for Redis to confirm it, then GET the snapshot. A change written
 * after the confirmation arrives as a notice; one written before is in the
 * snapshot; so nothing falls between the two. Only versions newer than the
 * one held are applied. Pub/sub is at-most-once (a notice published while
 * the subscriber is away is gone), so the snapshot is the truth: a notice
 * that skips a version, a reconnect and a subscriber restart all trigger a
 * re-read, and a lost notice costs latency, never correctness.
 *
 * ioredis' own auto-resubscribe is turned off on purpose: its `ready` event
 * fires before the re-subscription is confirmed, and reading the snapshot in
 * that window could miss a change. We subscribe ourselves on `ready` and
 * await the reply.
 */
import { mkdir, readFile, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from 'pino';
import { PoiseError, invalidConfig } from '../core/errors.js';
import { Rng } from '../core/rng.js';
import type { MembershipSnapshot } from '../core/spec.js';
import { defaultLogger } from '../log.js';
import { DEFAULT_MAX_DOCUMENT_BYTES, documentJson, formatOf, parseDocument, validateName, type ResolvedDocument } from './document.js';
import { DEFAULT_PREFIX, decodeEnvelope, membershipKeys, type Envelope, type MembershipKeys } from './redis-keys.js';
import type { MembershipSource } from './source.js';

/** Options of {@link RedisMembership}. */
export interface RedisMembershipOptions {
  /** `redis://[:password@]host:port[/db]` or `rediss://...` (TLS); passed to ioredis as is. */
  url: string;
  /** Cluster to follow. */
  cluster: string;
  /** Key prefix; default `poise`. */
  prefix?: string;
  /** A document file (JSON/YAML) to run from when Redis is unavailable at start. */
  fallbackFile?: string;
  /**
   * The last known snapshot: a file path (read at start when Redis is
   * unavailable, and rewritten atomically after every applied version), or
   * a snapshot held in memory. Preferred over `fallbackFile` when present.
   */
  lastKnown?: string | { version: number; document: unknown };
  /** Largest accepted notice or snapshot; default 1 MiB. Larger ones are refused. */
  maxMessageBytes?: number;
  /** Reconnect backoff: `min(maxMs, baseMs · 2^attempt)` plus up to 20 % jitter; default 100 / 5000 ms. */
  backoff?: { baseMs?: number; maxMs?: number };
  /** How long start() waits for Redis before falling back; default 3000 ms. */
  startTimeoutMs?: number;
  /** Extra ioredis options (tls, password, timeouts); they override the defaults. */
  redisOptions?: RedisOptions;
  /** pino logger; default {@link defaultLogger}. */
  logger?: Logger;
}

/** Where an applied snapshot came from (logged, and reported to `onApplied` observers). */
export type SnapshotOrigin = 'notice' | 'snapshot' | 'fallback' | 'last-known';

/**
 * Follows one cluster's membership in Redis.
 *
 * @example
 * const source = new RedisMembership({ url: 'redis://127.0.0.1:6379', cluster: 'db', lastKnown: '/var/lib/app/members.json' });
 * const binding = await bindMembership(source, balancer);
 */
export class RedisMembership implements MembershipSource {
  readonly #url: string;
  readonly #cluster: string;
  readonly #keys: MembershipKeys;
  readonly #maxBytes: number;
  readonly #baseMs: number;
  readonly #maxMs: number;
  readonly #startTimeoutMs: number;
  readonly #fallbackFile: string | undefined;
  readonly #lastKnown: RedisMembershipOptions['lastKnown'];
  readonly #redisOptions: RedisOptions;
  readonly #log: Logger;
  readonly #rng = new Rng();
  #sub: Redis | undefined;
  #cmd: Redis | undefined;
  #listener: ((snapshot: MembershipSnapshot) => void) | undefined;
  #version = 0;
  #closed = false;
  #synced: (() => void) | undefined;
  #resyncWanted = false;
  #resyncing = false;
  #wake: (() => void) | undefined;
  #persisting: Promise<void> = Promise.resolve();
  #subscriptions = 0;

  constructor(opts: RedisMembershipOptions) {
    if (typeof opts?.url !== 'string' || !/^rediss?:\/\//.test(opts.url)) {
      invalidConfig('options.url', 'must be a redis:// or rediss:// URL', opts?.url);
    }
    this.#url = opts.url;
    this.#cluster = validateName(opts.cluster, 'options.cluster');
    this.#keys = membershipKeys(this.#cluster, validateName(opts.prefix ?? DEFAULT_PREFIX, 'options.prefix'));
    this.#maxBytes = intOption(opts.maxMessageBytes ?? DEFAULT_MAX_DOCUMENT_BYTES, 'options.maxMessageBytes', 64);
    this.#baseMs = intOption(opts.backoff?.baseMs ?? 100, 'options.backoff.baseMs', 1);
    this.#maxMs = intOption(opts.backoff?.maxMs ?? 5000, 'options.backoff.maxMs', this.#baseMs);
    this.#startTimeoutMs = intOption(opts.startTimeoutMs ?? 3000, 'options.startTimeoutMs', 1);
    this.#fallbackFile = opts.fallbackFile;
    this.#lastKnown = opts.lastKnown;
    this.#redisOptions = opts.redisOptions ?? {};
    this.#log = (opts.logger ?? defaultLogger()).child({ component: 'membership', cluster: this.#cluster });
  }

  /** The version last applied (0 before the first). */
  get version(): number {
    return this.#version;
  }

  /** The snapshot key and channel this reader follows. */
  get keys(): MembershipKeys {
    return this.#keys;
  }

  /**
   * Connects, subscribes, reads the snapshot and delivers it. When Redis
   * does not answer within `startTimeoutMs` (or refuses the connection),
   * delivers the last known snapshot or the fallback file instead, logs
   * that clearly, and keeps reconnecting in the background with capped
   * backoff. Without either, it waits for Redis.
   */
  async start(listener: (snapshot: MembershipSnapshot) => void): Promise<void> {
    if (this.#listener !== undefined) invalidConfig('start', 'already started');
    this.#listener = listener;
    const synced = new Promise<'redis'>((resolve) => {
      this.#synced = () => resolve('redis');
    });
    let failed: (reason: string) => void = () => {};
    const down = new Promise<string>((resolve) => {
      failed = resolve;
    });
    const timer = setTimeout(() => failed(`no answer within ${this.#startTimeoutMs} ms`), this.#startTimeoutMs);
    const common: RedisOptions = {
      lazyConnect: true,
      retryStrategy: (times: number) => this.#backoff(times - 1),
      ...this.#redisOptions,
    };
    // The subscriber: own resubscription (see the file comment), no offline queue
    // (we only send SUBSCRIBE from the 'ready' handler).
    const sub = new Redis(this.#url, { ...common, autoResubscribe: false, enableOfflineQueue: false });
    // The reader: GETs queue while disconnected and run on reconnect; the resync loop bounds them.
    const cmd = new Redis(this.#url, { ...common, maxRetriesPerRequest: null });
    this.#sub = sub;
    this.#cmd = cmd;
    sub.on('ready', () => void this.#subscribe(sub));
    sub.on('message', (channel: string, message: string) => this.#onNotice(channel, message));
    sub.on('error', (err: Error) => {
      failed(err.message);
      this.#log.warn({ err: err.message }, 'redis subscriber connection error');
    });
    sub.on('reconnecting', (delay: number) => this.#log.warn({ delayMs: delay }, 'redis subscriber reconnecting'));
    sub.on('close', () => this.#log.debug('redis subscriber connection closed'));
    cmd.on('error', (err: Error) => this.#log.debug({ err: err.message }, 'redis reader connection error'));
    sub.connect().catch(() => {});
    cmd.connect().catch(() => {});
    try {
      const outcome = await Promise.race([synced, down]);
      if (outcome === 'redis' || this.#closed) return;
      const used = await this.#startFromFallback(outcome);
      if (!used) {
        this.#log.error(
          { reason: outcome, url: redactUrl(this.#url) },
          'Redis unavailable at start and no fallbackFile/lastKnown given; waiting for Redis (retrying with capped backoff)',
        );
        await synced;
      }
    } finally {
      clearTimeout(timer);
    }
  }

  /** Disconnects both connections. Idempotent. */
  async close(): Promise<void> {
    if (this.#closed) return;
    this.#closed = true;
    this.#wake?.();
    this.#synced?.();
    this.#sub?.disconnect();
    this.#cmd?.disconnect();
    await this.#persisting;
  }

  /**
   * Asks for a re-read of the snapshot (what a version gap or a reconnect
   * does). Exposed for operators and tests; normally never needed.
   */
  resync(reason = 'requested'): void {
    this.#requestResync(reason);
  }

  async #subscribe(sub: Redis): Promise<void> {
    if (this.#closed) return;
    try {
      // Awaiting the reply is the point: once Redis confirmed the
      // subscription, every later write reaches us as a notice.
      await sub.subscribe(this.#keys.channel);
      this.#subscriptions++;
      this.#log.info({ channel: this.#keys.channel, subscriptions: this.#subscriptions }, 'subscribed; reading the snapshot');
      this.#requestResync(this.#subscriptions === 1 ? 'subscribed' : 'resubscribed');
    } catch (err) {
      // The connection dropped between 'ready' and the reply: the next 'ready' retries.
      this.#log.warn({ err: (err as Error).message }, 'subscribe failed; will retry on reconnect');
    }
  }

  #onNotice(channel: string, message: string): void {
    if (channel !== this.#keys.channel) return;
    let env: Envelope;
    try {
      env = decodeEnvelope(message, { cluster: this.#cluster, maxBytes: this.#maxBytes, what: 'notice' });
    } catch (err) {
      this.#reject(err, 'notice');
      return;
    }
    if (env.version <= this.#version) return;
    if (env.version === this.#version + 1) {
      this.#apply(env, 'notice');
      return;
    }
    this.#log.info({ held: this.#version, notice: env.version }, 'notice skipped versions; re-reading the snapshot');
    this.#requestResync('version gap');
  }

  #requestResync(reason: string): void {
    this.#resyncWanted = true;
    this.#log.debug({ reason }, 'snapshot re-read requested');
    if (!this.#resyncing) void this.#resyncLoop();
  }

  async #resyncLoop(): Promise<void> {
    this.#resyncing = true;
    let failures = 0;
    while (this.#resyncWanted && !this.#closed) {
      this.#resyncWanted = false;
      try {
        const text = await this.#cmd!.get(this.#keys.snapshot);
        failures = 0;
        this.#onSnapshot(text);
      } catch (err) {
        if (this.#closed) break;
        this.#log.warn({ err: (err as Error).message }, 'snapshot read failed; retrying');
        this.#resyncWanted = true;
        await new Promise<void>((resolve) => {
          const t = setTimeout(resolve, this.#backoff(failures++));
          this.#wake = () => {
            clearTimeout(t);
            resolve();
          };
        });
        this.#wake = undefined;
      }
    }
    this.#resyncing = false;
  }

  #onSnapshot(text: string | null): void {
    if (text === null) {
      this.#log.warn({ key: this.#keys.snapshot, held: this.#version }, 'no snapshot stored for this cluster yet; membership unchanged');
      this.#synced?.();
      return;
    }
    let env: Envelope;
    try {
      env = decodeEnvelope(text, { cluster: this.#cluster, maxBytes: this.#maxBytes, what: 'snapshot' });
    } catch (err) {
      this.#reject(err, 'snapshot');
      this.#synced?.();
      return;
    }
    if (env.version > this.#version) this.#apply(env, 'snapshot');
    else if (env.version < this.#version) {
      this.#log.warn(
        { held: this.#version, stored: env.version },
        'stored snapshot is older than the version held (Redis lost data?); keeping the held version — re-apply with a version above it',
      );
    }
    this.#synced?.();
  }

  #apply(env: Envelope, origin: SnapshotOrigin): boolean {
    const { version, document } = env;
    try {
      this.#listener!({ version, cluster: document.cluster, backends: document.backends });
    } catch (err) {
      this.#reject(err, origin);
      return false;
    }
    this.#version = version;
    this.#log.info({ version, backends: document.backends.length, origin }, 'membership applied');
    if (typeof this.#lastKnown === 'string' && origin !== 'last-known') this.#persist(this.#lastKnown, version, document);
    return true;
  }

  #reject(err: unknown, origin: string): void {
    const e = err as Error;
    this.#log.error(
      { err: e.message, field: err instanceof PoiseError ? err.field : undefined, origin, version: this.#version },
      `membership ${origin} rejected; membership unchanged`,
    );
  }

  async #startFromFallback(reason: string): Promise<boolean> {
    const sources: [SnapshotOrigin, () => Promise<Envelope | undefined>][] = [
      ['last-known', () => this.#readLastKnown()],
      ['fallback', () => this.#readFallback()],
    ];
    for (const [origin, read] of sources) {
      let env: Envelope | undefined;
      try {
        env = await read();
      } catch (err) {
        this.#reject(err, origin);
        continue;
      }
      if (env === undefined) continue;
      if (this.#version !== 0) return true; // Redis answered meanwhile.
      if (this.#apply(env, origin)) {
        this.#log.warn(
          { reason, url: redactUrl(this.#url), origin, version: env.version, retryMaxMs: this.#maxMs },
          `Redis unavailable at start; running from the ${origin === 'fallback' ? 'fallback file' : 'last known snapshot'} until it answers (retrying with capped backoff)`,
        );
        return true;
      }
    }
    return false;
  }

  async #readLastKnown(): Promise<Envelope | undefined> {
    const lk = this.#lastKnown;
    if (lk === undefined) return undefined;
    if (typeof lk !== 'string') return decodeEnvelope(JSON.stringify(lk), { cluster: this.#cluster, maxBytes: this.#maxBytes, what: 'snapshot' });
    let text: string;
    try {
      text = await readFile(lk, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw err;
    }
    return decodeEnvelope(text, { cluster: this.#cluster, maxBytes: this.#maxBytes, what: 'snapshot' });
  }

  async #readFallback(): Promise<Envelope | undefined> {
    if (this.#fallbackFile === undefined) return undefined;
    const text = await readFile(this.#fallbackFile, 'utf8');
    const document: ResolvedDocument = parseDocument(text, { format: formatOf(this.#fallbackFile), maxBytes: this.#maxBytes });
    if (document.cluster !== this.#cluster) {
      invalidConfig('fallbackFile.cluster', `must be ${JSON.stringify(this.#cluster)}`, document.cluster);
    }
    // A versionless fallback is version 0: any snapshot from Redis replaces it.
    return { version: document.version ?? 0, document };
  }

  #persist(file: string, version: number, document: ResolvedDocument): void {
    const text = `{"version":${version},"document":${documentJson(document)}}\n`;
    this.#persisting = this.#persisting.then(async () => {
      try {
        await mkdir(path.dirname(file), { recursive: true });
        const tmp = `${file}.${process.pid}.tmp`;
        await writeFile(tmp, text);
        await rename(tmp, file); // atomic replace: a crash leaves the old or the new file, never half of one
      } catch (err) {
        this.#log.warn({ err: (err as Error).message, file }, 'could not write the last known snapshot');
      }
    });
  }

  /** Capped exponential backoff with up to 20 % jitter from our own Rng. */
  #backoff(attempt: number): number {
    const base = Math.min(this.#maxMs, this.#baseMs * 2 ** Math.min(attempt, 30));
    return Math.round(base + (base * this.#rng.below(201)) / 1000);
  }
}

function intOption(value: number, field: string, min: number): number {
  if (!Number.isSafeInteger(value) || value < min) invalidConfig(field, `must be an integer >= ${min}`, value);
  return value;
}

/** The URL without its password, for logs. */
export function redactUrl(url: string): string {
  return url.replace(/\/\/([^@/]*)@/, (_m, auth: string) => `//${auth.includes(':') ? `${auth.split(':')[0]}:***` : '***'}@`);
}
