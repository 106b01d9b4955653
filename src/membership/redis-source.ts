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
 *
 * Lineage: every stored value carries the lineage id of its version line
 * (drawn when a cluster's first version is written into an empty Redis). A
 * snapshot of another lineage than the one held means Redis lost its data and
 * was written again from scratch: it is adopted whatever its version, with one
 * warn line naming both lineages, so readers that held v3 and readers started
 * afterwards route the same way. A notice of another lineage triggers a
 * snapshot re-read (the snapshot is the truth); the adoption happens there.
 *
 * Delta notices (delta.ts): a notice `{version, lineage, base, ops, digest}`
 * is applied only by a reader holding exactly `base` of that lineage: the
 * ops applied to the held document, the result validated as a snapshot is
 * and its digest checked. Any other case — a gap, another lineage, a base
 * not held, a malformed notice, an unknown op, an invalid result, a digest
 * that does not match — re-reads the snapshot, and nothing else changes
 * (malformed input also gets one rate-limited log line).
 *
 * Sentinel: both connections find the master through the sentinels on every
 * (re)connection, so after a failover they reconnect to the new master and
 * the same "subscribe, confirmed, then read" order runs there: a reader
 * never stays on a version the new master moved past.
 *
 * Cluster: one ioredis Cluster client with sharded subscribers; the keys
 * carry the `{cluster}` hash tag, notices arrive by SSUBSCRIBE ('smessage').
 * ioredis re-subscribes a sharded subscriber after a topology change without
 * telling when Redis confirmed it, so on its 'subscribersReady' event we
 * SSUBSCRIBE again ourselves (a no-op for Redis when already subscribed) and
 * read the snapshot only after that reply.
 */
import type { Logger } from 'pino';
import { PoiseError, invalidConfig, isPoiseError } from '../core/errors.js';
import { Backoff } from '../core/backoff.js';
import type { MembershipSnapshot } from '../core/spec.js';
import { defaultLogger, rateLimited, type RateLimitedLogger } from '../log.js';
import { DEFAULT_MAX_DOCUMENT_BYTES, copySettings, type ResolvedDocument } from './document.js';
import { validateName } from './name.js';
import { lastKnownText, readFallback, readLastKnown, replaceFile } from './local-copies.js';
import { redactUrl } from './redis-errors.js';
import {
  DEFAULT_PREFIX,
  decodeEnvelope,
  decodeNotice,
  membershipKeys,
  type DeltaNotice,
  type Envelope,
  type MembershipKeys,
  type Notice,
} from './redis-keys.js';
import { applyDelta } from './delta.js';
import {
  COMMAND_TIMEOUT_MS,
  createRedisClient,
  describeTarget,
  isCommandTimeout,
  resolveRedisTarget,
  type RedisClient,
  type RedisClientOptions,
  type RedisTarget,
} from './redis-target.js';
import type { RedisMembershipOptions, SnapshotOrigin } from './redis-source-options.js';
import { reportDelivery, type MembershipSource, type SnapshotListener } from './source.js';
import { integerIn } from '../core/validate.js';

export { redactUrl } from './redis-errors.js';
export type { RedisMembershipOptions, SnapshotOrigin } from './redis-source-options.js';

/**
 * Follows one cluster's membership in Redis.
 *
 * @example
 * const source = new RedisMembership({ url: 'redis://127.0.0.1:6379', cluster: 'db', lastKnown: '/var/lib/app/members.json' });
 * const binding = await bindMembership(source, balancer);
 */
export class RedisMembership implements MembershipSource {
  readonly #url: string;
  readonly #target: RedisTarget;
  readonly #cluster: string;
  readonly #keys: MembershipKeys;
  readonly #maxBytes: number;
  readonly #backoff: Backoff;
  readonly #startTimeoutMs: number;
  readonly #failFast: boolean;
  readonly #rejections: RateLimitedLogger;
  readonly #fallbackFile: string | undefined;
  readonly #lastKnown: RedisMembershipOptions['lastKnown'];
  readonly #redisOptions: RedisClientOptions;
  readonly #log: Logger;
  #sub: RedisClient | undefined;
  #cmd: RedisClient | undefined;
  #listener: SnapshotListener | undefined;
  #version = 0;
  /** The lineage held (undefined before the first Redis snapshot, or from a fallback file / a pre-lineage value). */
  #lineage: string | undefined;
  /** Whether anything was applied (a fallback may be version 0). */
  #held = false;
  /** The document last applied: what a delta notice's ops apply to. */
  #document: ResolvedDocument | undefined;
  #problem: PoiseError | undefined;
  #closed = false;
  #synced: (() => void) | undefined;
  #resyncWanted = false;
  #resyncing = false;
  #wake: (() => void) | undefined;
  #persisting: Promise<void> = Promise.resolve();
  #subscriptions = 0;

  constructor(opts: RedisMembershipOptions) {
    this.#target = resolveRedisTarget(opts);
    this.#url = describeTarget(this.#target);
    this.#cluster = validateName(opts.cluster, 'options.cluster');
    this.#keys = membershipKeys(this.#cluster, validateName(opts.prefix ?? DEFAULT_PREFIX, 'options.prefix'), {
      hashTag: this.#target.kind === 'cluster',
    });
    this.#maxBytes = integerIn(opts.maxMessageBytes ?? DEFAULT_MAX_DOCUMENT_BYTES, 'options.maxMessageBytes', 64);
    // Jitter from this reader's own OS-seeded Rng: readers that lost Redis together do not reconnect together.
    this.#backoff = new Backoff({ baseMs: 100, maxMs: 5000, ...opts.backoff });
    this.#startTimeoutMs = integerIn(opts.startTimeoutMs ?? 3000, 'options.startTimeoutMs', 1);
    if (opts.failFast !== undefined && typeof opts.failFast !== 'boolean')
      invalidConfig('options.failFast', 'must be a boolean', opts.failFast);
    this.#failFast = opts.failFast ?? false;
    this.#fallbackFile = opts.fallbackFile;
    this.#lastKnown = opts.lastKnown;
    this.#redisOptions = opts.redisOptions ?? {};
    this.#log = (opts.logger ?? defaultLogger()).child({ component: 'membership', cluster: this.#cluster });
    this.#rejections = rateLimited(this.#log, { windowMs: integerIn(opts.warnWindowMs ?? 30_000, 'options.warnWindowMs', 1) });
  }

  /** The version last applied (0 before the first). */
  get version(): number {
    return this.#version;
  }

  /** The lineage of the snapshot last applied (undefined before the first Redis snapshot). */
  get lineage(): string | undefined {
    return this.#lineage;
  }

  /** Why no membership is in force (nothing stored, the stored one rejected, Redis unreachable); undefined once one is applied. */
  get problem(): PoiseError | undefined {
    return this.#problem;
  }

  /** Whether the subscriber connection is up and ready (false before start, while reconnecting, after close). */
  get connected(): boolean {
    return this.#sub?.status === 'ready';
  }

  /** `redis <snapshot key>`, for logs and errors. */
  get description(): string {
    return `redis ${this.#keys.snapshot}`;
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
   * backoff. Without either, it waits for Redis — or, with `failFast`,
   * rejects with `Unavailable`.
   */
  async start(listener: SnapshotListener): Promise<void> {
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
    const common: RedisClientOptions = {
      lazyConnect: true,
      // A frozen Redis: the snapshot GET and SUBSCRIBE fail at the deadline instead of waiting for ever (a re-read
      // retries with backoff; a subscription reconnects), and a reconnection's ready check does too.
      commandTimeout: COMMAND_TIMEOUT_MS,
      retryStrategy: (times: number) => this.#backoff.delayMs(times - 1),
      ...this.#redisOptions,
    };
    let sub: RedisClient;
    let cmd: RedisClient;
    if (this.#target.kind === 'cluster') {
      // One client: reads go to the slot's master, SSUBSCRIBE to ioredis' sharded subscriber of that master.
      sub = createRedisClient(this.#target, { ...common, maxRetriesPerRequest: null }, { sharded: true });
      cmd = sub;
      sub.on('subscribersReady', () => void this.#subscribe(sub));
      sub.on('smessage', (channel: string, message: string) => this.#onNotice(channel, message));
    } else {
      // The subscriber: own resubscription (see the file comment), no offline queue
      // (we only send SUBSCRIBE from the 'ready' handler).
      sub = createRedisClient(this.#target, { ...common, autoResubscribe: false, enableOfflineQueue: false });
      // The reader: GETs queue while disconnected and run on reconnect; the resync loop bounds them.
      cmd = createRedisClient(this.#target, { ...common, maxRetriesPerRequest: null });
      sub.on('message', (channel: string, message: string) => this.#onNotice(channel, message));
    }
    this.#sub = sub;
    this.#cmd = cmd;
    sub.on('ready', () => void this.#subscribe(sub));
    sub.on('error', (err: Error) => {
      failed(err.message);
      // Rate-limited (one line, then a count per window): an outage repeats it on every retry.
      this.#rejections.warn(err.message, { err: err.message }, 'redis subscriber connection error');
    });
    sub.on('reconnecting', (delay: number) => this.#rejections.warn('reconnecting', { delayMs: delay }, 'redis subscriber reconnecting'));
    sub.on('close', () => this.#log.debug('redis subscriber connection closed'));
    cmd.on('error', (err: Error) => this.#log.debug({ err: err.message }, 'redis reader connection error'));
    sub.connect().catch(() => {});
    if (cmd !== sub) cmd.connect().catch(() => {});
    try {
      const outcome = await Promise.race([synced, down]);
      if (outcome === 'redis' || this.#closed) return;
      const used = await this.#startFromFallback(outcome);
      if (!used) {
        const err = new PoiseError(
          'Unavailable',
          `redis ${redactUrl(this.#url)}: unavailable at start (${outcome}), and no fallbackFile or lastKnown membership to run from`,
          {
            field: 'redis',
          },
        );
        if (!this.#held) this.#problem ??= err;
        if (this.#failFast) {
          await this.close();
          throw err;
        }
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
    if (this.#cmd !== this.#sub) this.#cmd?.disconnect();
    this.#rejections.flush();
    await this.#persisting;
  }

  /**
   * Asks for a re-read of the snapshot (what a version gap or a reconnect
   * does). Exposed for operators and tests; normally never needed.
   */
  resync(reason = 'requested'): void {
    this.#requestResync(reason);
  }

  async #subscribe(sub: RedisClient, attempt = 0): Promise<void> {
    if (this.#closed) return;
    try {
      // Awaiting the reply is the point: once Redis confirmed the
      // subscription, every later write reaches us as a notice.
      if (this.#target.kind === 'cluster') await sub.ssubscribe(this.#keys.channel);
      else await sub.subscribe(this.#keys.channel);
      this.#subscriptions++;
      this.#log.info({ channel: this.#keys.channel, subscriptions: this.#subscriptions }, 'subscribed; reading the snapshot');
      this.#requestResync(this.#subscriptions === 1 ? 'subscribed' : 'resubscribed');
    } catch (err) {
      if (this.#target.kind === 'cluster') {
        // A Cluster may stay 'ready' while one shard's subscriber is being replaced: retry with backoff.
        const delay = this.#backoff.delayMs(attempt);
        this.#log.warn({ err: (err as Error).message, delayMs: delay }, 'ssubscribe failed; retrying');
        setTimeout(() => void this.#subscribe(sub, attempt + 1), delay).unref();
        return;
      }
      // The connection dropped between 'ready' and the reply: the next 'ready' retries.
      this.#log.warn({ err: (err as Error).message }, 'subscribe failed; will retry on reconnect');
      // No reply within the deadline on a connection that stays open (a frozen Redis): reconnect, so that the next
      // 'ready' subscribes and reads again (the SUBSCRIBE sent may still run late; its reply is nobody's).
      if (isCommandTimeout(err) && sub.status === 'ready') sub.disconnect(true);
    }
  }

  #onNotice(channel: string, message: string): void {
    if (channel !== this.#keys.channel) return;
    let notice: Notice;
    try {
      notice = decodeNotice(message, { cluster: this.#cluster, maxBytes: this.#maxBytes });
    } catch (err) {
      this.#reject(err, 'notice');
      // Whatever this notice was meant to say, the snapshot says it.
      this.#requestResync('rejected notice');
      return;
    }
    if (notice.kind === 'delta') {
      this.#onDelta(notice.delta);
      return;
    }
    const env = notice.envelope;
    if (this.#otherLineage(env)) {
      // Redis was written from scratch: the snapshot decides (and is adopted whatever its version).
      this.#log.info(
        { held: this.#version, lineage: this.#lineage, noticeLineage: env.lineage },
        'notice of another lineage; re-reading the snapshot',
      );
      this.#requestResync('lineage changed');
      return;
    }
    if (this.#held && env.version <= this.#version) return;
    if (env.version === this.#version + 1) {
      this.#apply(env, 'notice');
      return;
    }
    this.#log.info({ held: this.#version, notice: env.version }, 'notice skipped versions; re-reading the snapshot');
    this.#requestResync('version gap');
  }

  #onDelta(delta: DeltaNotice): void {
    if (this.#held && this.#lineage === delta.lineage && delta.version <= this.#version) return;
    const document = this.#document;
    if (!this.#held || document === undefined || this.#lineage !== delta.lineage || delta.base !== this.#version) {
      this.#log.info(
        { held: this.#version, lineage: this.#lineage, notice: delta.version, base: delta.base, noticeLineage: delta.lineage },
        'delta notice is not based on the version held; re-reading the snapshot',
      );
      this.#requestResync('delta base not held');
      return;
    }
    let next: ResolvedDocument;
    try {
      next = applyDelta(document, delta.ops, delta.digest, { maxBytes: this.#maxBytes, what: 'notice' });
    } catch (err) {
      this.#reject(
        isPoiseError(err) && err.code !== 'Corrupt' ? new PoiseError('Corrupt', err.message, { field: err.field, cause: err }) : err,
        'notice',
      );
      this.#requestResync('delta rejected');
      return;
    }
    this.#apply({ version: delta.version, lineage: delta.lineage, document: next }, 'notice');
  }

  /** True when `env` carries a lineage and it is not the one held (both known). */
  #otherLineage(env: Envelope): boolean {
    return env.lineage !== undefined && this.#lineage !== undefined && env.lineage !== this.#lineage;
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
          const t = setTimeout(resolve, this.#backoff.delayMs(failures++));
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
      if (!this.#held) {
        this.#problem = new PoiseError(
          'NotFound',
          `redis ${redactUrl(this.#url)}: no membership stored for cluster ${JSON.stringify(this.#cluster)} (key ${this.#keys.snapshot})`,
          {
            field: 'cluster',
          },
        );
      }
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
    if (!this.#held) this.#apply(env, 'snapshot');
    else if (this.#otherLineage(env)) {
      this.#log.warn(
        { heldLineage: this.#lineage, heldVersion: this.#version, lineage: env.lineage, version: env.version },
        `membership lineage changed from ${this.#lineage} (version ${this.#version}) to ${env.lineage} (version ${env.version}): Redis lost its data and was written again; adopting the stored snapshot whatever its version`,
      );
      this.#apply(env, 'snapshot');
    } else if (env.lineage !== undefined && this.#lineage === undefined) {
      // Held from a fallback file or a value written before lineages: Redis is the truth.
      if (env.version <= this.#version) {
        this.#log.info(
          { held: this.#version, stored: env.version, lineage: env.lineage },
          'adopting the stored snapshot (the held one has no lineage)',
        );
      }
      this.#apply(env, 'snapshot');
    } else if (env.version > this.#version) this.#apply(env, 'snapshot');
    else if (env.version < this.#version) {
      this.#log.warn(
        { held: this.#version, stored: env.version, lineage: env.lineage },
        'stored snapshot is older than the version held in the same lineage (Redis restored from an older copy?); keeping the held version — re-apply with a version above it',
      );
    }
    this.#synced?.();
  }

  #apply(env: Envelope, origin: SnapshotOrigin): boolean {
    const { version, lineage, document } = env;
    const snapshot: MembershipSnapshot =
      lineage === undefined
        ? { version, cluster: document.cluster, backends: document.backends }
        : { version, lineage, cluster: document.cluster, backends: document.backends };
    copySettings(document, snapshot);
    let result: unknown;
    try {
      result = this.#listener!(snapshot);
    } catch (err) {
      this.#reject(err, origin);
      return false;
    }
    // Delivered: the source moves even when the target ignored it (offering it again would not change the answer).
    this.#version = version;
    this.#lineage = lineage;
    this.#document = document;
    this.#held = true;
    this.#problem = undefined;
    const applied = reportDelivery(this.#log, result, snapshot, { origin, ...(lineage === undefined ? {} : { lineage }) });
    if (!applied) return false;
    if (typeof this.#lastKnown === 'string' && origin !== 'last-known') this.#persist(this.#lastKnown, version, lineage, document);
    return true;
  }

  #reject(err: unknown, origin: string): void {
    const e = err as Error;
    if (!this.#held && isPoiseError(err)) this.#problem = err;
    // Rate-limited by reason: the same malformed notice in a loop is one line, then a count.
    this.#rejections.error(
      e.message,
      {
        err: e.message,
        code: isPoiseError(err) ? err.code : undefined,
        field: isPoiseError(err) ? err.field : undefined,
        origin,
        version: this.#version,
      },
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
      if (this.#held) return true; // Redis answered meanwhile.
      if (this.#apply(env, origin)) {
        this.#log.warn(
          { reason, url: redactUrl(this.#url), origin, version: env.version, retryMaxMs: this.#backoff.maxMs },
          `Redis unavailable at start; running from the ${origin === 'fallback' ? 'fallback file' : 'last known snapshot'} until it answers (retrying with capped backoff)`,
        );
        return true;
      }
    }
    return false;
  }

  async #readLastKnown(): Promise<Envelope | undefined> {
    return this.#lastKnown === undefined ? undefined : readLastKnown(this.#lastKnown, this.#cluster, this.#maxBytes);
  }

  async #readFallback(): Promise<Envelope | undefined> {
    return this.#fallbackFile === undefined ? undefined : readFallback(this.#fallbackFile, this.#cluster, this.#maxBytes);
  }

  #persist(file: string, version: number, lineage: string | undefined, document: ResolvedDocument): void {
    const text = lastKnownText(version, lineage, document);
    this.#persisting = this.#persisting.then(async () => {
      try {
        await replaceFile(file, text);
      } catch (err) {
        this.#log.warn({ err: (err as Error).message, file }, 'could not write the last known snapshot');
      }
    });
  }
}
