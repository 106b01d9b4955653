/**
 * The Kubernetes membership source (`k8s:namespace/service[:port-name]`): a
 * list + watch of the service's `discovery.k8s.io/v1` EndpointSlices
 * (label `kubernetes.io/service-name=<service>`), each change turned into a
 * snapshot by endpoint-slices.ts and delivered in strictly increasing
 * versions.
 *
 * The loop, and the failure modes of `@kubernetes/client-node`'s informer
 * that it is built against:
 *
 *   list (pages of `limit`, `continue`) → resourceVersion RV
 *   watch ?watch=1&resourceVersion=RV&allowWatchBookmarks=true&timeoutSeconds=T
 *     ADDED / MODIFIED / DELETED  → the slice set changes, a snapshot when the membership did; RV moves
 *     BOOKMARK                    → RV moves (nothing else)
 *     ERROR with code 410, or HTTP 410 Gone → re-list (RV is too old)
 *     the server ends the response (its timeout T) → watch again from RV, no re-list
 *     a reset mid-stream (ECONNRESET; client-node#1496 ends the watch there) → the
 *       partial event is dropped and the watch resumes from RV: the cut event comes again
 *     nothing at all — no event, no bookmark — for `stallTimeoutMs` (client-node#958,
 *       #596: the informer silently stops after about an hour) → drop the watch, re-list
 *   every failure → a jittered exponential back-off before the next request
 *   (core/backoff.ts); only a received event resets it, not a successful list, so an
 *   API server that answers lists and then fails every watch (or restarts: #1933's
 *   re-list storm) is asked ever less often, and a fleet's retries spread out.
 *
 * A bad answer never empties a working membership: a malformed slice keeps
 * that slice's last good version (a new one is left out); a membership with
 * no ready endpoint, an unreachable API server, an HTTP error all keep the
 * last good membership in force. Each such state is logged once when it
 * starts (and once when it ends), and counted in {@link status}.
 */
import { randomBytes } from 'node:crypto';
import type { Logger } from 'pino';
import { Backoff } from '../core/backoff.js';
import { PoiseError, checkOptionKeys, invalidConfig } from '../core/errors.js';
import { Rng } from '../core/rng.js';
import type { MembershipSnapshot } from '../core/spec.js';
import { timersOption, type TimerSource } from '../core/timers.js';
import { integerIn } from '../core/validate.js';
import { defaultLogger } from '../log.js';
import { reportDelivery, type MembershipSource, type SnapshotListener } from '../membership/source.js';
import { membershipOf, parseSlice, type Slice } from './endpoint-slices.js';
import { KubeClient, KubeRequestError, type WatchEnd } from './kube-client.js';
import { resolveCredentials } from './kube-config.js';
import { OPTION_KEYS, parseKubernetesTarget, type KubernetesSourceOptions, type KubernetesTarget } from './kubernetes-target.js';
import { newDiscoveryStatus, type DiscoveryErrorKind, type DiscoveryStatus, type DiscoveryStatusHolder } from './status.js';

export { parseKubernetesTarget, type KubernetesSourceOptions, type KubernetesTarget } from './kubernetes-target.js';

/** How a watch run ends: what the loop does next. */
type Next = 'rewatch' | 'relist';

/**
 * Follows one Kubernetes service's EndpointSlices.
 *
 * @example
 * const source = kubernetesSource('shop/api:http');
 * const binding = await bindMembership(source, balancer);
 */
export class KubernetesMembership implements MembershipSource, DiscoveryStatusHolder {
  readonly description: string;
  readonly status: DiscoveryStatus;
  readonly #target: KubernetesTarget;
  readonly #opts: KubernetesSourceOptions;
  readonly #timers: TimerSource;
  readonly #log: Logger;
  readonly #backoff: Backoff;
  readonly #rng: Rng;
  readonly #stallMs: number;
  readonly #watchSeconds: number;
  readonly #requestMs: number;
  readonly #startMs: number;
  readonly #initial: 'reject' | 'wait';
  readonly #pageSize: number;
  readonly #lineage = randomBytes(16).toString('hex');
  #namespace = '';
  #client: KubeClient | undefined;
  #listener: SnapshotListener | undefined;
  #slices = new Map<string, Slice>();
  #rv: string | undefined;
  #version = 0;
  #issued = 0;
  #lastKey: string | undefined;
  #records = 0;
  #rejectedKey: string | undefined;
  #problem: PoiseError | undefined;
  #connected = false;
  /** Consecutive failures since the last received event: the back-off's attempt. */
  #failures = 0;
  /** The error state in force (logged when it starts), or undefined when all is well. */
  #trouble: string | undefined;
  #closed = false;
  #abortWatch: ((reason: string) => void) | undefined;
  #wake: (() => void) | undefined;
  #loop: Promise<void> | undefined;
  #firstDelivery: (() => void) | undefined;
  /** What a test or benchmark counts: list and watch requests made, back-off sleeps begun and the last one's length (ms). */
  readonly counts = { lists: 0, watches: 0, backoffs: 0, lastBackoffMs: 0 };

  constructor(target: string, opts: KubernetesSourceOptions = {}) {
    checkOptionKeys(opts, OPTION_KEYS, 'options');
    this.#target = parseKubernetesTarget(target);
    this.#opts = opts;
    this.description = `k8s:${target}`;
    this.status = newDiscoveryStatus(this.description);
    this.#timers = timersOption(opts.timers);
    this.#stallMs = integerIn(opts.stallTimeoutMs ?? 120_000, 'options.stallTimeoutMs', 1);
    this.#watchSeconds = integerIn(opts.watchTimeoutSeconds ?? 300, 'options.watchTimeoutSeconds', 1, 86_400);
    this.#requestMs = integerIn(opts.requestTimeoutMs ?? 30_000, 'options.requestTimeoutMs', 1);
    this.#startMs = integerIn(opts.startTimeoutMs ?? 10_000, 'options.startTimeoutMs', 0);
    if (opts.initial !== undefined && opts.initial !== 'reject' && opts.initial !== 'wait')
      invalidConfig('options.initial', 'must be "reject" or "wait"', opts.initial);
    this.#initial = opts.initial ?? 'wait';
    this.#pageSize = integerIn(opts.pageSize ?? 500, 'options.pageSize', 1, 10_000);
    this.#rng = opts.seed === undefined ? new Rng() : new Rng(opts.seed);
    const b = opts.backoff ?? {};
    this.#backoff = new Backoff({ baseMs: b.baseMs ?? 500, maxMs: b.maxMs ?? 30_000 }, this.#rng);
    this.#log = (opts.logger ?? defaultLogger()).child({ component: 'discovery', source: this.description });
  }

  get version(): number {
    return this.#version;
  }

  get problem(): PoiseError | undefined {
    return this.#problem;
  }

  /** Whether the last request to the API server succeeded. */
  get connected(): boolean {
    return this.#connected;
  }

  /** The resourceVersion the next watch resumes from. */
  get resourceVersion(): string | undefined {
    return this.#rv;
  }

  /**
   * Resolves the credentials (rejects `InvalidConfig` when they cannot be
   * read), then lists and watches; resolves after the first membership was
   * delivered, or after `startTimeoutMs` without one (`problem` says why;
   * the source keeps trying).
   */
  async start(listener: SnapshotListener): Promise<void> {
    if (this.#listener !== undefined) invalidConfig('start', 'already started');
    this.#listener = listener;
    const creds = await resolveCredentials(this.#opts);
    this.#namespace = this.#target.namespace ?? creds.namespace ?? 'default';
    this.#client = new KubeClient(creds, { timers: this.#timers, tokenRefreshMs: this.#opts.tokenRefreshMs });
    this.#problem = new PoiseError('Unavailable', `${this.description}: no membership from ${creds.server} yet`, { field: 'source' });
    let timer: unknown;
    const first = new Promise<void>((resolve) => {
      this.#firstDelivery = resolve;
      if (this.#startMs > 0) timer = this.#timers.setTimeout(resolve, this.#startMs);
      else resolve();
    });
    this.#loop = this.#run();
    await first;
    this.#timers.clearTimeout(timer);
    if (this.#initial === 'reject' && this.#version === 0 && !this.#closed) {
      const problem = this.#problem;
      await this.close();
      if (problem !== undefined) throw problem;
    }
  }

  async close(): Promise<void> {
    this.#closed = true;
    this.#abortWatch?.('closed');
    this.#wake?.();
    this.#firstDelivery?.();
    await this.#loop;
  }

  #path(extra: string): string {
    const selector = encodeURIComponent(`kubernetes.io/service-name=${this.#target.service}`);
    return `/apis/discovery.k8s.io/v1/namespaces/${this.#namespace}/endpointslices?labelSelector=${selector}${extra}`;
  }

  async #run(): Promise<void> {
    while (!this.#closed) {
      if (!(await this.#list())) {
        await this.#sleep();
        continue;
      }
      for (;;) {
        if (this.#closed) return;
        const next = await this.#watch();
        if (next === 'relist') break;
      }
    }
  }

  /** Sleeps the back-off of the current failure count (woken early by close). */
  #sleep(): Promise<void> {
    if (this.#closed) return Promise.resolve();
    const ms = this.#backoff.delayMs(this.#failures - 1);
    this.counts.backoffs++;
    this.counts.lastBackoffMs = ms;
    return new Promise((resolve) => {
      const t = this.#timers.setTimeout(() => {
        this.#wake = undefined;
        resolve();
      }, ms);
      this.#wake = () => {
        this.#timers.clearTimeout(t);
        resolve();
      };
    });
  }

  /** One full list; true when it succeeded (the slices replaced, the membership delivered). */
  async #list(): Promise<boolean> {
    const client = this.#client!;
    const items: unknown[] = [];
    let rv: string | undefined;
    let cont: string | undefined;
    try {
      do {
        this.counts.lists++;
        const page = (await client.get(
          this.#path(`&limit=${this.#pageSize}${cont === undefined ? '' : `&continue=${encodeURIComponent(cont)}`}`),
          this.#requestMs,
        )) as Record<string, unknown> | null;
        const meta = typeof page === 'object' && page !== null ? (page['metadata'] as Record<string, unknown> | undefined) : undefined;
        const pageItems = page?.['items'];
        if (typeof meta?.['resourceVersion'] !== 'string' || !(pageItems === null || Array.isArray(pageItems)))
          throw new KubeRequestError(
            'malformed',
            `the list answer of ${client.server} is not an EndpointSliceList (no metadata.resourceVersion or items)`,
          );
        rv ??= meta['resourceVersion'] as string;
        if (Array.isArray(pageItems)) items.push(...(pageItems as unknown[]));
        cont = typeof meta['continue'] === 'string' && meta['continue'] !== '' ? meta['continue'] : undefined;
      } while (cont !== undefined && !this.#closed);
    } catch (err) {
      this.#requestFailed(err, 'list');
      return false;
    }
    if (this.#closed) return false;
    this.#connected = true;
    const slices = new Map<string, Slice>();
    items.forEach((item, i) => {
      const slice = this.#parse(item, `list.items[${i}]`);
      if (slice !== undefined) slices.set(slice.name, slice);
      else {
        // A malformed slice keeps its last good version, when there is one.
        const name = nameOf(item);
        const held = name === undefined ? undefined : this.#slices.get(name);
        if (held !== undefined) slices.set(held.name, held);
      }
    });
    this.#slices = slices;
    this.#rv = rv;
    this.#log.debug({ slices: slices.size, resourceVersion: rv }, 'endpoint slices listed');
    this.#deliver();
    return true;
  }

  /** One watch from the held resourceVersion; what to do next. */
  async #watch(): Promise<Next> {
    const client = this.#client!;
    const seconds = this.#watchSeconds + Math.floor(this.#rng.float() * this.#watchSeconds);
    let gone = false;
    let stall: unknown;
    const arm = (): void => {
      this.#timers.clearTimeout(stall);
      stall = this.#timers.setTimeout(() => handle.abort('stall'), this.#stallMs);
    };
    this.counts.watches++;
    const handle = client.watch(
      this.#path(`&watch=1&resourceVersion=${encodeURIComponent(this.#rv ?? '')}&allowWatchBookmarks=true&timeoutSeconds=${seconds}`),
      (value, error) => {
        if (this.#closed) return;
        const verdict = this.#event(value, error);
        if (verdict === 'gone') {
          gone = true;
          handle.abort('gone');
        }
      },
      arm,
    );
    this.#abortWatch = (reason) => handle.abort(reason);
    arm();
    const end: WatchEnd = await handle.end;
    this.#timers.clearTimeout(stall);
    this.#abortWatch = undefined;
    if (this.#closed) return 'relist';
    if (gone || (end.kind === 'failed' && end.error.status === 410)) {
      this.#log.debug({ resourceVersion: this.#rv }, 'watch: 410 Gone; re-listing');
      this.#failures++;
      await this.#sleep();
      return 'relist';
    }
    if (end.kind === 'aborted') {
      // The stall watchdog (close returned above).
      this.#failed('timeout', 'stall', `no event and no bookmark on the watch for ${this.#stallMs} ms; dropped it, re-listing`);
      await this.#sleep();
      return 'relist';
    }
    if (end.kind === 'closed') {
      // The server's own timeout: watch again from the held resourceVersion. A watch that carried nothing counts as a failure, so a server that ends every watch at once is not asked in a loop.
      if (end.lines === 0) {
        this.#failures++;
        await this.#sleep();
      }
      return 'rewatch';
    }
    this.#requestFailed(end.error, 'watch');
    await this.#sleep();
    return 'rewatch';
  }

  /** Applies one watch line; 'gone' for a 410 ERROR event. */
  #event(value: unknown, error: Error | undefined): 'ok' | 'gone' | 'bad' {
    const ev = value as { type?: unknown; object?: unknown } | null;
    if (error !== undefined || typeof ev !== 'object' || ev === null || typeof ev.type !== 'string') {
      this.#failed(
        'malformed',
        'event',
        `a watch line is not a watch event (${error?.message ?? 'no type'}); ignored, membership unchanged`,
      );
      return 'bad';
    }
    const object = ev.object as Record<string, unknown> | undefined;
    const rv = resourceVersionOf(object);
    switch (ev.type) {
      case 'ADDED':
      case 'MODIFIED': {
        const slice = this.#parse(object, 'event.object');
        if (rv !== undefined) this.#rv = rv;
        if (slice === undefined) return 'bad';
        this.#slices.set(slice.name, slice);
        break;
      }
      case 'DELETED': {
        const name = nameOf(object);
        if (rv !== undefined) this.#rv = rv;
        if (name === undefined) {
          this.#failed('malformed', 'event', 'a DELETED event names no slice (metadata.name); ignored, membership unchanged');
          return 'bad';
        }
        this.#slices.delete(name);
        break;
      }
      case 'BOOKMARK':
        if (rv !== undefined) this.#rv = rv;
        this.#failures = 0;
        return 'ok';
      case 'ERROR': {
        const code = object?.['code'];
        if (code === 410) return 'gone';
        const kind: DiscoveryErrorKind = typeof code === 'number' && code >= 500 ? 'servfail' : 'other';
        this.#failed(
          kind,
          `error-event-${String(code)}`,
          `the watch sent an ERROR event (code ${String(code)}: ${String(object?.['message'] ?? '')})`,
        );
        return 'bad';
      }
      default:
        this.#failed('malformed', 'event', `a watch event of unknown type ${JSON.stringify(ev.type)}; ignored`);
        return 'bad';
    }
    this.#failures = 0;
    this.#connected = true;
    this.#deliver();
    return 'ok';
  }

  #parse(object: unknown, field: string): Slice | undefined {
    try {
      return parseSlice(object, field);
    } catch (err) {
      this.#failed('malformed', 'slice', `a malformed EndpointSlice was ignored (${(err as Error).message}); its last good version stays`);
      return undefined;
    }
  }

  /** A request failed: count it by kind, log it once per state, and drop the token after a 401. */
  #requestFailed(err: unknown, what: 'list' | 'watch'): void {
    this.#connected = false;
    this.#failures++;
    const e = err instanceof KubeRequestError ? err : new KubeRequestError('unreachable', (err as Error)?.message ?? String(err));
    if (e.status === 401) this.#client?.invalidateToken();
    const kind: DiscoveryErrorKind =
      e.kind === 'http'
        ? e.status === 404
          ? 'notfound'
          : (e.status ?? 0) >= 500 || e.status === 429
            ? 'servfail'
            : 'other'
        : e.kind === 'reset'
          ? 'unreachable'
          : e.kind === 'credentials'
            ? 'other'
            : e.kind;
    // One state per kind and status: a reset watch then a refused reconnect is one outage, logged once.
    this.#count(kind, `request:${kind}:${e.status ?? ''}`, `${what} failed: ${e.message}; the last good membership stays`);
  }

  /** A failure that is not a request's (the stall watchdog, a malformed object). */
  #failed(kind: DiscoveryErrorKind, key: string, message: string): void {
    if (kind === 'timeout') this.#failures++;
    this.#count(kind, key, message);
  }

  #count(kind: DiscoveryErrorKind, key: string, message: string): void {
    this.status.errors[kind]++;
    this.status.state = this.#version > 0 ? 'stale' : 'failing';
    if (this.#trouble !== key) {
      this.#trouble = key;
      this.#log.warn({ kind, version: this.#version }, message);
    }
  }

  #recovered(): void {
    if (this.#trouble !== undefined) {
      this.#log.info({ version: this.#version, was: this.#trouble }, 'discovery recovered');
      this.#trouble = undefined;
    }
  }

  /** Delivers the membership of the held slices when it changed and has a ready endpoint. */
  #deliver(): void {
    const m = membershipOf(this.#slices.values(), this.#target.port);
    if (m.portless.length > 0)
      this.#count(
        'malformed',
        `port:${m.portless.join(',')}`,
        `slices without the port ${this.#target.port === undefined ? '(several ports and no port name given)' : JSON.stringify(this.#target.port)}: ${m.portless.join(', ')}`,
      );
    if (m.ready === 0) {
      this.#count('empty', 'empty', `the service has no ready endpoint (${m.backends.length} endpoints); the last good membership stays`);
      return;
    }
    const key = JSON.stringify(m.backends);
    if (key !== this.#lastKey && key !== this.#rejectedKey) {
      const version = ++this.#issued;
      const snapshot: MembershipSnapshot = { version, lineage: this.#lineage, backends: m.backends };
      if (this.#opts.cluster !== undefined) snapshot.cluster = this.#opts.cluster;
      let result: unknown;
      try {
        result = this.#listener!(snapshot);
      } catch (err) {
        this.#rejectedKey = key;
        this.#count('malformed', 'rejected', `the membership was rejected (${(err as Error).message}); the last good membership stays`);
        return;
      }
      this.#version = version;
      this.#lastKey = key;
      this.#records = m.backends.length;
      this.#problem = undefined;
      reportDelivery(this.#log, result, snapshot, { ready: m.ready, skipped: m.skipped });
      this.#firstDelivery?.();
      this.#firstDelivery = undefined;
    }
    if (this.#version === 0) return;
    this.status.records = this.#records;
    this.status.lastSuccessMs = Date.now();
    this.status.state = 'ok';
    if (m.portless.length === 0) this.#recovered();
  }
}

function nameOf(object: unknown): string | undefined {
  const meta = (object as { metadata?: { name?: unknown } } | null)?.metadata;
  return typeof meta?.name === 'string' && meta.name !== '' ? meta.name : undefined;
}

function resourceVersionOf(object: unknown): string | undefined {
  const meta = (object as { metadata?: { resourceVersion?: unknown } } | null)?.metadata;
  return typeof meta?.resourceVersion === 'string' && meta.resourceVersion !== '' ? meta.resourceVersion : undefined;
}

/**
 * The Kubernetes source of `target` (`namespace/service[:port-name]`), for
 * the scheme registry (`k8s:`).
 *
 * @example
 * const source = kubernetesSource('shop/api:http', { kubeconfig: '/home/me/.kube/config' });
 */
export function kubernetesSource(target: string, options: KubernetesSourceOptions = {}): KubernetesMembership {
  return new KubernetesMembership(target, options);
}
