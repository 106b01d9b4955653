/**
 * MembershipPublisher: the write side of the Redis control plane.
 *
 * Every write is validated here first (a document that fails validation
 * never reaches Redis, so it changes nothing), then goes through the one
 * atomic script ({@link WRITE_SCRIPT}). The single-backend operations are
 * read-modify-write: read the snapshot, change it, validate, and write with
 * "expected version = what I read"; a concurrent writer makes the script
 * answer "conflict" and the operation re-reads and retries.
 *
 * Durability: Redis acknowledges a write once the master applied it;
 * replication is asynchronous, so a master that dies before its replicas
 * received the write loses it at the failover although the writer saw
 * success. With `waitReplicas: N` every write is followed by
 * `WAIT N waitTimeoutMs` on the same connection (one pipeline, so it runs on
 * the master that ran the script, also in a Cluster): the write is reported
 * as done only when N replicas acknowledged it, and as `NotReplicated`
 * otherwise (it is on the master, and may or may not survive a failover).
 *
 * Notices: a write whose change is a few backends (every single-backend
 * operation; an `apply` whose ops are at most half the document's size)
 * publishes a delta notice (delta.ts) computed against the document it read,
 * and the script sends it only when that document is still the stored one
 * (expected version and lineage); otherwise the whole snapshot is published.
 * `notices: 'full'` always publishes the whole snapshot, as publishers before
 * delta notices did (for fleets whose readers are not upgraded yet).
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { PoiseError, invalidConfig } from '../core/errors.js';
import { checkBackendSet, resolveBackendSpec, type BackendSpec, type ResolvedBackendSpec } from '../core/spec.js';
import { compactSpec } from '../core/spec-fields.js';
import { Backoff } from '../core/backoff.js';
import { validateWeight } from '../core/weight.js';
import { defaultLogger } from '../log.js';
import {
  copySettings,
  sameSettings,
  DEFAULT_MAX_DOCUMENT_BYTES,
  MAX_VERSION,
  documentJson,
  resolveDocument,
  validateVersion,
  type ResolvedDocument,
} from './document.js';
import { validateName } from './name.js';
import { redisUnavailable } from './redis-errors.js';
import { createRedisClient, describeTarget, resolveRedisTarget, type RedisClient } from './redis-target.js';
import { COMMAND_TIMEOUT_MS, isCommandTimeout } from './redis-target.js';
import { DEFAULT_PREFIX, decodeEnvelope, envelopeJson, membershipKeys, type Envelope, type MembershipKeys } from './redis-keys.js';
import type { MembershipPublisherOptions } from './redis-publisher-options.js';
import { WRITE_SCRIPT } from './redis-script.js';
import {
  fencedArgs,
  parseReply,
  scriptErrorReply,
  type DeltaArgs,
  type FencedArgs,
  type ScriptClient,
  type WriteArgs,
  type WriteFence,
  type WriteReply,
} from './write-calls.js';
import { diffBackends, documentDigest } from './delta.js';
import { integerIn } from '../core/validate.js';

export type { MembershipPublisherOptions } from './redis-publisher-options.js';

/** The stored state of a cluster. */
export interface StoredMembership {
  /** The stored version. */
  version: number;
  /** The stored lineage (set when the cluster's first version was written into an empty Redis); undefined for a value written before lineages existed. */
  lineage: string | undefined;
  /** The stored document, backends in compact form (default-valued fields left out). */
  document: { cluster: string; backends: BackendSpec[] };
}

/** Upper bound of the envelope around a stored document. */
const ENVELOPE_BYTES = 80;

/**
 * Writes membership to Redis. Each write returns the new version.
 *
 * @example
 * const pub = new MembershipPublisher({ url: 'redis://127.0.0.1:6379', cluster: 'db' });
 * await pub.apply({ cluster: 'db', backends: [{ id: 'a', address: '10.0.0.1:5432' }] }); // → 1
 * await pub.drain('a'); // → 2
 * await pub.close();
 */
export class MembershipPublisher {
  readonly #cluster: string;
  readonly #keys: MembershipKeys;
  readonly #maxBytes: number;
  readonly #maxAttempts: number;
  readonly #redis: ScriptClient;
  readonly #log: Logger;
  /** Retry after a lost conditional write: [1, 2^n) ms, at most 256 ms, from this publisher's own OS-seeded Rng. */
  readonly #retry = new Backoff({ baseMs: 1, maxMs: 256, maxExponent: 8 });
  readonly #url: string;
  readonly #publish: 'PUBLISH' | 'SPUBLISH';
  readonly #waitReplicas: number;
  readonly #waitTimeoutMs: number;
  readonly #deltas: boolean;
  readonly #commandTimeoutMs: number;
  #lastConnectionError: string | undefined;
  /** The highest version this publisher wrote, and its lineage: the floor of the next "current + 1" (see WRITE_SCRIPT, ARGV[7]). */
  #highWater: { version: number; lineage: string } | undefined;
  #queue: Promise<void> = Promise.resolve();
  /**
   * The last stored value this publisher decoded or wrote, and its decoded
   * envelope: a read-modify-write GETs the value anyway (another writer may
   * have moved it), and when it is exactly this text — the common case of
   * one publisher making changes one after another — the 1,000-backend
   * document is not parsed and validated again. Keyed by the whole text, so
   * any other writer's value is decoded as usual.
   */
  #memo: { text: string; env: Envelope } | undefined;

  constructor(opts: MembershipPublisherOptions) {
    const target = resolveRedisTarget(opts);
    this.#cluster = validateName(opts.cluster, 'options.cluster');
    this.#keys = membershipKeys(this.#cluster, validateName(opts.prefix ?? DEFAULT_PREFIX, 'options.prefix'), {
      hashTag: target.kind === 'cluster',
    });
    this.#publish = target.kind === 'cluster' ? 'SPUBLISH' : 'PUBLISH';
    this.#maxBytes = integerIn(opts.maxMessageBytes ?? DEFAULT_MAX_DOCUMENT_BYTES, 'options.maxMessageBytes', 64);
    this.#maxAttempts = integerIn(opts.maxAttempts ?? 16, 'options.maxAttempts', 1);
    this.#waitReplicas = integerIn(opts.waitReplicas ?? 0, 'options.waitReplicas', 0, 100);
    this.#waitTimeoutMs = integerIn(opts.waitTimeoutMs ?? 1000, 'options.waitTimeoutMs', 1, 60_000);
    if (opts.notices !== undefined && opts.notices !== 'delta' && opts.notices !== 'full')
      invalidConfig('options.notices', 'must be "delta" or "full"', opts.notices);
    this.#deltas = opts.notices !== 'full';
    this.#log = (opts.logger ?? defaultLogger()).child({ component: 'membership-publisher', cluster: this.#cluster });
    // Every command has a deadline (beyond WAIT's own timeout): a frozen Redis fails a write instead of holding it for ever.
    this.#commandTimeoutMs = opts.redisOptions?.commandTimeout ?? COMMAND_TIMEOUT_MS + this.#waitTimeoutMs;
    this.#redis = createRedisClient(target, {
      lazyConnect: true,
      ...opts.redisOptions,
      commandTimeout: this.#commandTimeoutMs,
    }) as ScriptClient;
    this.#redis.defineCommand('poiseWrite', { lua: WRITE_SCRIPT, numberOfKeys: 2 });
    // The same script with the lease key as KEYS[3] and the token as ARGV[12] (the fleet watcher's writes).
    this.#redis.defineCommand('poiseWriteFenced', { lua: WRITE_SCRIPT, numberOfKeys: 3 });
    this.#url = describeTarget(target);
    this.#redis.on('error', (err: Error) => {
      this.#lastConnectionError = err.message;
      this.#log.debug({ err: err.message }, 'redis connection error');
    });
    this.#redis.on('ready', () => {
      this.#lastConnectionError = undefined;
    });
  }

  /** The snapshot key and channel this publisher writes. */
  get keys(): MembershipKeys {
    return this.#keys;
  }

  /**
   * Replaces the whole membership. The document's `cluster` must be this
   * publisher's. A document `version`, when given, must be greater than the
   * stored one and becomes the new version; otherwise the new version is the
   * stored one + 1. `ifVersion` makes the write conditional (0 = must not
   * exist). Versions never leave [0, 2^53 − 1].
   *
   * Throws `PoiseError`: a validation code (`InvalidConfig`, `InvalidWeight`,
   * `DuplicateIdentity`, `InconsistentTopology`) for the document;
   * `Conflict` when `ifVersion` does not match or the version is not newer;
   * `CapacityExhausted` when the stored version is already 2^53 − 1;
   * `Corrupt` when the stored value is unreadable (without an explicit
   * version); `Unavailable` when Redis cannot be reached; with `fence`,
   * `Conflict` (field `fence`) when the lease is not held under its token.
   * Nothing is written in every case.
   */
  async apply(document: unknown, opts: { ifVersion?: number; fence?: WriteFence } = {}): Promise<number> {
    const doc = resolveDocument(document);
    this.#checkCluster(doc);
    if (opts.ifVersion !== undefined) validateVersion(opts.ifVersion, 'ifVersion');
    const expected = opts.ifVersion === undefined ? '' : String(opts.ifVersion);
    const requested = doc.version === undefined ? '' : String(doc.version);
    const json = documentJson(doc);
    let reply: WriteReply | undefined;
    const base = this.#deltas ? await this.#deltaBase(opts.ifVersion) : undefined;
    if (base !== undefined) {
      const ops = this.#deltaArgs(base, doc, json.length / 2);
      // Conditional on the version read, so the ops are exact; lost to another writer, an unconditional apply falls back to the whole snapshot.
      if (ops !== undefined) reply = await this.#write(json, String(base.version), requested, ops, opts.fence);
      if (reply !== undefined && !reply.written && opts.ifVersion === undefined) reply = undefined;
    }
    reply ??= await this.#write(json, expected, requested, undefined, opts.fence);
    if (!reply.written) {
      throw new PoiseError('Conflict', `ifVersion: the stored version is ${reply.current}, not ${opts.ifVersion}; nothing written`, {
        field: 'ifVersion',
      });
    }
    this.#log.info(
      { version: reply.version, lineage: reply.lineage, backends: doc.backends.length, notice: reply.notice },
      'membership document applied',
    );
    return reply.version;
  }

  /** Adds one backend (its id must be new); returns the new version. */
  async add(spec: BackendSpec): Promise<number> {
    const resolved = resolveBackendSpec(spec, 'backend');
    return this.#modify(`add ${resolved.id}`, (backends) => {
      if (backends.some((b) => b.id === resolved.id)) {
        throw new PoiseError(
          'DuplicateIdentity',
          `backend.id: ${JSON.stringify(resolved.id)} already exists in cluster ${JSON.stringify(this.#cluster)}`,
          {
            field: 'backend.id',
          },
        );
      }
      return [...backends, resolved];
    });
  }

  /** Removes one backend; returns the new version. */
  remove(id: string): Promise<number> {
    return this.#modify(`remove ${id}`, (backends) => {
      this.#indexOf(backends, id);
      return backends.filter((b) => b.id !== id);
    });
  }

  /** Marks a backend `draining` (no new picks; in-flight work finishes); returns the new version. */
  drain(id: string): Promise<number> {
    return this.#change(`drain ${id}`, id, (b) => ({ ...b, status: 'draining' }));
  }

  /** Marks a backend `ready` again; returns the new version. */
  undrain(id: string): Promise<number> {
    return this.#change(`undrain ${id}`, id, (b) => ({ ...b, status: 'ready' }));
  }

  /** Sets a backend's weight (an integer in [1, 2^32 − 1]); returns the new version. */
  async setWeight(id: string, weight: number): Promise<number> {
    validateWeight(weight, 'weight');
    return this.#change(`weight ${id} ${weight}`, id, (b) => ({ ...b, weight }));
  }

  /**
   * The stored membership, or undefined when the cluster has none. Throws
   * `Corrupt` (naming the field) when the stored value is not a valid
   * snapshot, `Unavailable` when Redis cannot be reached.
   */
  async show(): Promise<StoredMembership | undefined> {
    const env = await this.#read('nothing read');
    if (env === undefined) return undefined;
    return {
      version: env.version,
      lineage: env.lineage,
      document: { cluster: env.document.cluster, backends: env.document.backends.map(compactSpec) },
    };
  }

  /** Disconnects. Idempotent. */
  async close(): Promise<void> {
    if (this.#redis.status === 'end') return;
    if (this.#redis.status === 'wait') {
      this.#redis.disconnect();
      return;
    }
    await this.#redis.quit().catch(() => this.#redis.disconnect());
  }

  /** The stored snapshot an apply can be a delta against (undefined: none, unreadable, or not the `ifVersion` one). */
  async #deltaBase(ifVersion: number | undefined): Promise<Envelope | undefined> {
    let env: Envelope | undefined;
    try {
      env = await this.#read('nothing written');
    } catch {
      return undefined; // unreadable or unreachable: the plain write reports (or replaces) it
    }
    if (env === undefined || env.lineage === undefined || (ifVersion !== undefined && env.version !== ifVersion)) return undefined;
    return env;
  }

  /** Delta ops from `base` to `doc` when they exist and their JSON is at most `maxChars` long; the health and retry budget blocks must be unchanged. */
  #deltaArgs(base: Envelope, doc: ResolvedDocument, maxChars: number): DeltaArgs | undefined {
    if (base.lineage === undefined || !sameSettings(base.document, doc)) return undefined;
    const ops = diffBackends(base.document.backends, doc.backends);
    if (ops === undefined) return undefined;
    const json = JSON.stringify(ops);
    return json.length <= maxChars ? { ops: json, lineage: base.lineage } : undefined;
  }

  #checkCluster(doc: ResolvedDocument): void {
    if (doc.cluster !== this.#cluster) {
      invalidConfig('cluster', `must be ${JSON.stringify(this.#cluster)} (the cluster this publisher writes)`, doc.cluster);
    }
  }

  #indexOf(backends: readonly ResolvedBackendSpec[], id: string): number {
    const i = backends.findIndex((b) => b.id === id);
    if (i < 0) {
      throw new PoiseError(
        'NotFound',
        `id: no backend ${JSON.stringify(id)} in cluster ${JSON.stringify(this.#cluster)}; nothing written`,
        { field: 'id' },
      );
    }
    return i;
  }

  #change(what: string, id: string, f: (b: ResolvedBackendSpec) => ResolvedBackendSpec): Promise<number> {
    return this.#modify(what, (backends) => {
      const i = this.#indexOf(backends, id);
      const next = backends.slice();
      next[i] = f(backends[i]!);
      return next;
    });
  }

  /** Runs read-modify-write operations of this publisher one at a time, in call order. */
  #modify(what: string, f: (backends: readonly ResolvedBackendSpec[]) => ResolvedBackendSpec[]): Promise<number> {
    const run = this.#queue.then(() => this.#modifyNow(what, f));
    this.#queue = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  async #modifyNow(what: string, f: (backends: readonly ResolvedBackendSpec[]) => ResolvedBackendSpec[]): Promise<number> {
    for (let attempt = 1; attempt <= this.#maxAttempts; attempt++) {
      if (attempt > 1) {
        // Another writer won the race: back off a random [1, 2^(attempt − 1)) ms so the contenders spread out.
        await new Promise((resolve) => setTimeout(resolve, this.#retry.delayMs(attempt - 2)));
      }
      const env = await this.#read('nothing written');
      const current = env?.version ?? 0;
      const backends = f(env?.document.backends ?? []);
      // Every spec is validated (the stored ones when read, a new or changed one by its operation); the list laws are checked here.
      checkBackendSet(backends);
      const doc: ResolvedDocument = { cluster: this.#cluster, version: undefined, backends };
      if (env !== undefined) copySettings(env.document, doc);
      const ops = this.#deltas && env !== undefined ? this.#deltaArgs(env, doc, Number.POSITIVE_INFINITY) : undefined;
      const json = documentJson(doc);
      const reply = await this.#write(json, String(current), '', ops);
      if (reply.written) {
        // What the script stored is exactly envelopeJson(version, lineage, json), whose decoding is `doc`
        // (its specs and health block come from a decoded value; nothing outside this class holds them).
        this.#memo = {
          text: envelopeJson(reply.version, reply.lineage, json),
          env: { version: reply.version, lineage: reply.lineage, document: doc },
        };
        this.#log.info({ version: reply.version, lineage: reply.lineage, op: what, notice: reply.notice }, 'membership changed');
        return reply.version;
      }
      this.#log.debug({ op: what, read: current, stored: reply.current, attempt }, 'concurrent write; retrying');
    }
    throw new PoiseError('Conflict', `${what}: gave up after ${this.#maxAttempts} attempts under concurrent writes; nothing written`);
  }

  async #read(outcome: string): Promise<Envelope | undefined> {
    let text: string | null;
    try {
      text = await this.#redis.get(this.#keys.snapshot);
    } catch (err) {
      if (isCommandTimeout(err))
        throw redisUnavailable(
          this.#url,
          new Error(`no reply within ${this.#commandTimeoutMs} ms: Redis frozen or unreachable`),
          undefined,
          outcome,
        );
      throw redisUnavailable(this.#url, err, this.#lastConnectionError, outcome);
    }
    if (text === null) return undefined;
    const memo = this.#memo;
    if (memo !== undefined && memo.text === text) return memo.env;
    const env = decodeEnvelope(text, { cluster: this.#cluster, maxBytes: this.#maxBytes, what: 'snapshot' });
    this.#memo = { text, env };
    return env;
  }

  async #write(docJson: string, expected: string, requested: string, delta?: DeltaArgs, fence?: WriteFence): Promise<WriteReply> {
    // The stored value is `{"version":N,"lineage":"<32 hex>","document":<docJson>}`: at most 80 bytes around the document.
    const bytes = Buffer.byteLength(docJson, 'utf8') + ENVELOPE_BYTES;
    if (bytes > this.#maxBytes) {
      throw new PoiseError(
        'InvalidConfig',
        `document: ${bytes} bytes with its envelope exceeds the limit of ${this.#maxBytes} bytes; nothing written`,
        {
          field: 'document',
        },
      );
    }
    // A fresh lineage on every call: the script keeps the stored one and uses this only for a cluster's first version.
    const lineage = randomBytes(16).toString('hex');
    const hw = this.#highWater;
    const floor = hw === undefined ? ['', ''] : [String(hw.version), hw.lineage];
    const args = [
      this.#keys.snapshot,
      this.#keys.channel,
      this.#publish,
      docJson,
      expected,
      requested,
      lineage,
      String(MAX_VERSION),
      ...floor,
      ...(delta === undefined ? ['', '', ''] : [delta.ops, documentDigest(docJson), delta.lineage]),
    ] as WriteArgs;
    if (this.#waitReplicas > 0) return this.#writeAndWait(args, fence);
    let reply: unknown;
    try {
      reply = fence === undefined ? await this.#redis.poiseWrite(...args) : await this.#redis.poiseWriteFenced(...fencedArgs(args, fence));
    } catch (err) {
      throw this.#scriptError(err);
    }
    return this.#noteWritten(parseReply(reply));
  }

  /** Raises the high-water mark to a written version (a new lineage replaces it). */
  #noteWritten(reply: WriteReply): WriteReply {
    const hw = this.#highWater;
    if (reply.written && (hw === undefined || hw.lineage !== reply.lineage || reply.version > hw.version))
      this.#highWater = { version: reply.version, lineage: reply.lineage };
    return reply;
  }

  /**
   * The script and `WAIT n timeout` in one pipeline: both reach the same
   * connection back to back (in a Cluster, the pipeline goes to the node of
   * the keys' slot; WAIT has no key and travels with it), so WAIT counts the
   * replicas that hold this write.
   */
  async #writeAndWait(args: WriteArgs, fence: WriteFence | undefined): Promise<WriteReply> {
    let results: [Error | null, unknown][] | null;
    try {
      const pipeline = this.#redis.pipeline() as ReturnType<RedisClient['pipeline']> & {
        poiseWrite(...a: WriteArgs): unknown;
        poiseWriteFenced(...a: FencedArgs): unknown;
      };
      if (fence === undefined) pipeline.poiseWrite(...args);
      else pipeline.poiseWriteFenced(...fencedArgs(args, fence));
      pipeline.call('WAIT', String(this.#waitReplicas), String(this.#waitTimeoutMs));
      results = await pipeline.exec();
    } catch (err) {
      throw this.#scriptError(err);
    }
    const [script, wait] = results ?? [];
    if (script === undefined || script[0] !== null) throw this.#scriptError(script?.[0] ?? new Error('the pipeline returned no reply'));
    // Published even when not replicated: the high-water mark must cover it.
    const reply = this.#noteWritten(parseReply(script[1]));
    if (!reply.written) return reply;
    const acked = wait !== undefined && wait[0] === null ? Number(wait[1]) : -1;
    if (acked >= this.#waitReplicas) return reply;
    const why =
      acked < 0
        ? `WAIT failed (${wait?.[0]?.message ?? 'no reply'})`
        : `acknowledged by ${acked} of ${this.#waitReplicas} replicas within ${this.#waitTimeoutMs} ms`;
    this.#log.warn({ version: reply.version, acked, waitReplicas: this.#waitReplicas }, 'write not replicated to enough replicas');
    throw new PoiseError(
      'NotReplicated',
      `waitReplicas: version ${reply.version} was written on the master but ${why}; a failover before it replicates can lose it (read back with show())`,
      { field: 'waitReplicas' },
    );
  }

  /** Turns the script's error replies into codes; anything else is Redis being unavailable. */
  #scriptError(err: unknown): PoiseError {
    const message = (err as Error)?.message ?? '';
    const coded = scriptErrorReply(message);
    if (coded !== undefined) return coded;
    if (isCommandTimeout(err))
      return redisUnavailable(
        this.#url,
        new Error(`no reply within ${this.#commandTimeoutMs} ms: Redis frozen or unreachable`),
        undefined,
        'the write was sent and may still be applied when Redis answers (read it back with show())',
      );
    return redisUnavailable(this.#url, err, this.#lastConnectionError, 'nothing written');
  }
}
