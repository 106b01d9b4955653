/**
 * The membership source contract and {@link bindMembership}, which feeds a
 * source into a Balancer (or anything with `update(snapshot)`).
 */
import type { Logger } from 'pino';
import type { MembershipSnapshot } from '../core/spec.js';
import { defaultLogger } from '../log.js';

/**
 * Where membership comes from: a file, an array, Redis. A source delivers
 * validated snapshots in strictly increasing version order and never
 * delivers one that failed validation.
 */
export interface MembershipSource {
  /**
   * Starts the source; `listener` receives every new snapshot (the first one
   * before the promise resolves, when the source has one). A listener that
   * throws rejects that snapshot: it is logged and the source's `version`
   * does not move.
   */
  start(listener: (snapshot: MembershipSnapshot) => void): Promise<void>;
  /** Stops watching / disconnects. Idempotent. */
  close(): Promise<void>;
  /** The version last delivered to the listener (0 before the first). */
  readonly version: number;
}

/** What a source feeds: the Balancer's `update` (structural, so this layer names no runtime type). */
export interface MembershipTarget {
  update(snapshot: MembershipSnapshot): number;
}

/** A running source → target binding. */
export interface MembershipBinding {
  /** The version in force in the target. */
  readonly version: number;
  /** Closes the source. */
  close(): Promise<void>;
}

/**
 * Starts `source` and applies each snapshot to `target` (a `Balancer`).
 * A snapshot the target rejects is logged by the source; the target keeps
 * its last good membership.
 *
 * @example
 * const balancer = new Balancer();
 * const binding = await bindMembership(new StaticMembership({ file: 'members.yaml' }), balancer);
 * // ... later
 * await binding.close();
 */
export async function bindMembership(
  source: MembershipSource,
  target: MembershipTarget,
  opts: { logger?: Logger } = {},
): Promise<MembershipBinding> {
  const log = opts.logger ?? defaultLogger();
  let version = 0;
  await source.start((snapshot) => {
    version = target.update(snapshot);
    log.debug({ version, backends: snapshot.backends.length }, 'membership applied to balancer');
  });
  return {
    get version() {
      return version;
    },
    close: () => source.close(),
  };
}
