/**
 * The membership source contract and {@link bindMembership}, which feeds a
 * source into a Balancer (or anything with `apply(snapshot)` or
 * `update(snapshot)`).
 *
 * One Balancer follows one source: versions are only comparable within one
 * source's line, so a second binding to the same target is refused
 * (`Conflict`). Direct `balancer.update()` calls beside a binding share the
 * Balancer's one version space: whichever snapshot is newer wins, and an
 * older one is ignored and logged as ignored, never as applied.
 */
import type { Logger } from 'pino';
import { PoiseError } from '../core/errors.js';
import type { MembershipOutcome, MembershipSnapshot } from '../core/spec.js';
import { defaultLogger } from '../log.js';

/**
 * Receives each snapshot of a source. It may return the target's
 * {@link MembershipOutcome}; any other return value (or none) counts as
 * "applied". Throwing rejects the snapshot.
 */
export type SnapshotListener = (snapshot: MembershipSnapshot) => unknown;

/**
 * Where membership comes from: a file, an array, Redis. A source delivers
 * validated snapshots in strictly increasing version order within one
 * lineage and never delivers one that failed validation.
 */
export interface MembershipSource {
  /**
   * Starts the source; `listener` receives every new snapshot (the first one
   * before the promise resolves, when the source has one). A listener that
   * throws rejects that snapshot: it is logged and the source's `version`
   * does not move. A listener that returns `{ applied: false }` ignored it:
   * the source logs that, not "membership applied".
   */
  start(listener: SnapshotListener): Promise<void>;
  /** Stops watching / disconnects. Idempotent. */
  close(): Promise<void>;
  /** The version last delivered to the listener (0 before the first). */
  readonly version: number;
  /**
   * Why the source has no membership in force right now — nothing stored,
   * the stored one rejected, the store unreachable — as the `PoiseError` to
   * report; undefined once a snapshot was applied. Optional for sources
   * written outside this package.
   */
  readonly problem?: PoiseError | undefined;
  /**
   * Whether the source's connection to its store is up (Redis: the
   * subscriber is ready); undefined for sources without one (a file, an
   * array). Optional; read by metrics.
   */
  readonly connected?: boolean | undefined;
  /** A short name for logs and errors (`redis poise:db:snapshot`, `file members.yaml`). */
  readonly description?: string;
}

/** What a source feeds: a `Balancer` (`apply`), or anything with `update(snapshot) → version in force`. */
export type MembershipTarget =
  | { apply(snapshot: MembershipSnapshot): MembershipOutcome }
  | { update(snapshot: MembershipSnapshot): number };

/** A running source → target binding. */
export interface MembershipBinding {
  /** The version in force in the target. */
  readonly version: number;
  /** Closes the source and releases the target for another binding. */
  close(): Promise<void>;
}

/** Options of {@link bindMembership}. */
export interface BindOptions {
  /** pino logger; default {@link defaultLogger}. */
  logger?: Logger;
  /** Called after each snapshot the target applied (not for ignored ones). */
  onApplied?: (outcome: MembershipOutcome & { applied: true }) => void;
}

/** The {@link MembershipOutcome} a listener returned, or undefined when it returned anything else. @internal */
export function outcomeOf(result: unknown): MembershipOutcome | undefined {
  if (typeof result !== 'object' || result === null) return undefined;
  const r = result as Record<string, unknown>;
  return typeof r['applied'] === 'boolean' && typeof r['version'] === 'number' ? (result as MembershipOutcome) : undefined;
}

/** The source's name for messages. @internal */
export function describeSource(source: MembershipSource): string {
  return source.description ?? source.constructor?.name ?? 'a membership source';
}

function offer(target: MembershipTarget, snapshot: MembershipSnapshot): MembershipOutcome {
  if ('apply' in target && typeof target.apply === 'function') return target.apply(snapshot);
  // An update-only target answers the version in force: it applied the snapshot iff that is the snapshot's.
  const version = (target as { update(snapshot: MembershipSnapshot): number }).update(snapshot);
  return version === snapshot.version
    ? { applied: true, version, previous: Number.NaN }
    : { applied: false, version, offered: snapshot.version, reason: 'not-newer' };
}

/**
 * Logs what became of a delivered snapshot, from the listener's return value:
 * "membership applied" (info) only when the target applied it, otherwise
 * "membership version N ignored: not newer than M in force" (warn). Returns
 * whether it was applied. Shared by every source of this package.
 * @internal
 */
export function reportDelivery(log: Logger, result: unknown, snapshot: MembershipSnapshot, fields: Record<string, unknown> = {}): boolean {
  const outcome = outcomeOf(result);
  if (outcome !== undefined && !outcome.applied) {
    log.warn(
      { ...fields, version: snapshot.version, inForce: outcome.version },
      `membership version ${snapshot.version} ignored: not newer than ${outcome.version} in force`,
    );
    return false;
  }
  log.info({ ...fields, version: snapshot.version, backends: snapshot.backends.length }, 'membership applied');
  return true;
}

/** Targets with a live binding, and the binding's token (the source it follows). */
const bound = new WeakMap<object, { name: string }>();

/**
 * Starts `source` and applies each snapshot to `target` (a `Balancer`).
 * A snapshot the target rejects is logged by the source; the target keeps
 * its last good membership. Throws `Conflict` when `target` already has a
 * live binding.
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
  opts: BindOptions = {},
): Promise<MembershipBinding> {
  const log = opts.logger ?? defaultLogger();
  const name = describeSource(source);
  const existing = bound.get(target);
  if (existing !== undefined) {
    throw new PoiseError(
      'Conflict',
      `bindMembership: the target already follows ${existing.name}; refusing a second source (${name}): versions of two sources are not comparable. Close the first binding, or feed one source`,
      { field: 'target' },
    );
  }
  const token = { name };
  bound.set(target, token);
  let version = 0;
  const release = (): void => {
    if (bound.get(target) === token) bound.delete(target);
  };
  try {
    await source.start((snapshot) => {
      const outcome = offer(target, snapshot);
      version = outcome.version;
      log.debug(
        { source: name, ...outcome, backends: snapshot.backends.length },
        outcome.applied ? 'membership applied to target' : 'membership ignored by target',
      );
      if (outcome.applied) opts.onApplied?.(outcome);
      return outcome;
    });
  } catch (err) {
    release();
    throw err;
  }
  return {
    get version() {
      return version;
    },
    close: async () => {
      release();
      await source.close();
    },
  };
}
