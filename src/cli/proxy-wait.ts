/**
 * `poise proxy` without a first membership: wait for one, saying why every
 * few seconds, and serve nothing meanwhile (the proxy does not listen, so a
 * client is refused at once instead of being accepted and reset).
 */
import type { Logger } from 'pino';
import type { PoiseError } from '../core/errors.js';

/** How a wait ended. */
export type WaitResult = { kind: 'applied' } | { kind: 'stopped' } | { kind: 'failed'; error: unknown };

/** Options of {@link waitForMembership}. */
export interface WaitOptions {
  /** Resolves when the first membership has been applied. */
  applied: Promise<void>;
  /** Rejects when the source fails for good (a start error); may never settle. */
  started: Promise<unknown>;
  /** Resolves on SIGINT / SIGTERM. */
  stopped: Promise<void>;
  /** Whether a membership is in force now (the Balancer's `hasMembership`). */
  hasMembership: () => boolean;
  /** Why there is no membership now (the source's `problem`). */
  problem: () => PoiseError | undefined;
  log: Logger;
  /** Interval between "still waiting" lines, ms. */
  everyMs: number;
  /** Runs `fn` every `ms`; returns a cancel function. Default `setInterval` (injectable for tests). */
  every?: (fn: () => void, ms: number) => () => void;
}

function defaultEvery(fn: () => void, ms: number): () => void {
  const t = setInterval(fn, ms);
  return () => clearInterval(t);
}

/**
 * Waits for the first membership. Logs one warn line when the source has
 * started without one (with its reason), then one every `everyMs` until it
 * arrives, the process is stopped, or the source fails.
 */
export async function waitForMembership(opts: WaitOptions): Promise<WaitResult> {
  const { log } = opts;
  const t0 = Date.now();
  const say = (): void => {
    if (opts.hasMembership()) return;
    const p = opts.problem();
    log.warn(
      { reason: p?.message ?? 'the membership source has not answered yet', code: p?.code, field: p?.field, waitingMs: Date.now() - t0 },
      'proxy: no membership yet; not listening until one is applied (--require-membership fails instead)',
    );
  };
  const cancel = (opts.every ?? defaultEvery)(say, opts.everyMs);
  try {
    return await Promise.race<WaitResult>([
      opts.applied.then(() => ({ kind: 'applied' }) as const),
      opts.stopped.then(() => ({ kind: 'stopped' }) as const),
      opts.started.then(
        () => {
          // Started without a membership: say why now, not only at the next tick.
          say();
          return new Promise<WaitResult>(() => {});
        },
        (error: unknown) => ({ kind: 'failed', error }) as const,
      ),
    ]);
  } finally {
    cancel();
  }
}
