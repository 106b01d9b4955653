/** The one way a test catches an error: by its PoiseError (of any copy of the package, matched by brand). */
import { PoiseError } from '../../src/core/errors.js';

/** The PoiseError `fn` throws, or undefined when it returns; anything else it throws propagates. */
export function caught(fn: () => unknown): PoiseError | undefined {
  try {
    fn();
  } catch (err) {
    if (err instanceof PoiseError) return err;
    throw err;
  }
  return undefined;
}

/** The PoiseError `fn` throws; fails the test when it returns or throws something else. */
export function thrown(fn: () => unknown): PoiseError {
  const err = caught(fn);
  if (err === undefined) throw new Error('expected a PoiseError, but it returned');
  return err;
}

/**
 * The PoiseError `promise` rejects with; fails the test when it resolves or
 * rejects with something else. Handles the rejection at once, so a promise
 * started early and awaited later is never an unhandled rejection.
 */
export function rejection(promise: Promise<unknown>): Promise<PoiseError> {
  return promise.then(
    () => {
      throw new Error('expected a PoiseError rejection, but it resolved');
    },
    (err: unknown) => {
      if (err instanceof PoiseError) return err;
      throw err;
    },
  );
}
