/**
 * FleetMembership: fleet mode as one membership source, what `poise proxy
 * --discover SPEC --redis URL` and `poise bench` run. It pairs a
 * {@link FleetWatcher} (this process joins the election; the elected one
 * runs the discovery source and publishes into Redis) with the
 * {@link RedisMembership} every process reads the cluster through, the
 * watcher too: the snapshots it delivers, its version, problem and
 * connection are the Redis reader's.
 */
import type { RedisMembership } from '../membership/redis-source.js';
import type { MembershipSource, SnapshotListener } from '../membership/source.js';
import type { FleetWatcher } from './fleet-watcher.js';

/**
 * The watcher and the reader of one process of a fleet, started and closed
 * together.
 *
 * @example
 * const watcher = new FleetWatcher({ url, cluster: 'api', source: () => discoverySource('dns:api.internal:8080') });
 * await bindMembership(new FleetMembership(watcher, new RedisMembership({ url, cluster: 'api' })), balancer);
 */
export class FleetMembership implements MembershipSource {
  readonly watcher: FleetWatcher;
  readonly reader: RedisMembership;
  readonly #source: string;
  #closed: Promise<void> | undefined;

  /** `source`: the discovery source as the user wrote it, for {@link description}. */
  constructor(watcher: FleetWatcher, reader: RedisMembership, source = 'discovery') {
    this.watcher = watcher;
    this.reader = reader;
    this.#source = source;
  }

  /** Joins the election (its first round), then starts the reader. */
  async start(listener: SnapshotListener): Promise<void> {
    await this.watcher.start();
    try {
      await this.reader.start(listener);
    } catch (err) {
      await this.close();
      throw err;
    }
  }

  /** Closes the reader and the watcher (which gives its lease up when it holds it). Idempotent. */
  close(): Promise<void> {
    this.#closed ??= Promise.all([this.reader.close(), this.watcher.close()]).then(() => undefined);
    return this.#closed;
  }

  get version(): number {
    return this.reader.version;
  }

  get problem(): MembershipSource['problem'] {
    return this.reader.problem;
  }

  get connected(): boolean {
    return this.reader.connected;
  }

  /** `redis <snapshot key> (fleet watcher of <source>)`. */
  get description(): string {
    return `${this.reader.description} (fleet watcher of ${this.#source})`;
  }
}
