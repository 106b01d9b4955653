import { describe, expect, it } from 'vitest';
import { waitForMembership } from '../../src/cli/proxy-wait.js';
import { PoiseError } from '../../src/core/errors.js';
import { captureLog } from '../helpers/log-capture.js';

function deferred<T = void>() {
  let resolve!: (v: T) => void;
  let reject!: (e: unknown) => void;
  const promise = new Promise<T>((res, rej) => ((resolve = res), (reject = rej)));
  return { promise, resolve, reject };
}

/** An interval driven by hand. */
function manualEvery() {
  let tick: (() => void) | undefined;
  let cancelled = false;
  return {
    every: (fn: () => void, ms: number) => {
      expect(ms).toBe(5000);
      tick = fn;
      return () => (cancelled = true);
    },
    tick: () => tick?.(),
    get cancelled() {
      return cancelled;
    },
  };
}

const flush = () => new Promise((r) => setImmediate(r));

describe('waitForMembership', () => {
  it('says why once the source has started without one, then on every tick; resolves when one is applied', async () => {
    const log = captureLog();
    const applied = deferred();
    const started = deferred<unknown>();
    const clock = manualEvery();
    let has = false;
    let problem: PoiseError | undefined;
    const wait = waitForMembership({
      applied: applied.promise,
      started: started.promise,
      stopped: new Promise(() => {}),
      hasMembership: () => has,
      problem: () => problem,
      log: log.logger,
      everyMs: 5000,
      every: clock.every,
    });
    clock.tick();
    expect(log.find('no membership yet').map((r) => r['reason'])).toEqual(['the membership source has not answered yet']);
    problem = new PoiseError('NotFound', 'nothing stored', { field: 'cluster' });
    started.resolve(undefined);
    await flush();
    clock.tick();
    expect(log.find('no membership yet').map((r) => [r['reason'], r['code'], r['field']])).toEqual([
      ['the membership source has not answered yet', undefined, undefined],
      ['nothing stored', 'NotFound', 'cluster'],
      ['nothing stored', 'NotFound', 'cluster'],
    ]);
    has = true;
    applied.resolve();
    expect(await wait).toEqual({ kind: 'applied' });
    expect(clock.cancelled).toBe(true);
    clock.tick(); // a late tick after the membership: silent
    expect(log.find('no membership yet')).toHaveLength(3);
  });

  it('ends with the start error, or on stop', async () => {
    const boom = new PoiseError('Unavailable', 'redis down');
    const failed = waitForMembership({
      applied: new Promise(() => {}),
      started: Promise.reject(boom),
      stopped: new Promise(() => {}),
      hasMembership: () => false,
      problem: () => undefined,
      log: captureLog().logger,
      everyMs: 5000,
      every: manualEvery().every,
    });
    expect(await failed).toEqual({ kind: 'failed', error: boom });
    const stopped = waitForMembership({
      applied: new Promise(() => {}),
      started: new Promise(() => {}),
      stopped: Promise.resolve(),
      hasMembership: () => false,
      problem: () => undefined,
      log: captureLog().logger,
      everyMs: 5000,
      every: manualEvery().every,
    });
    expect(await stopped).toEqual({ kind: 'stopped' });
  });
});
