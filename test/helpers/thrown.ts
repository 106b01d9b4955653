import { PoiseError } from '../../src/core/errors.js';

/** Runs `fn` and returns the PoiseError it throws; fails the test when it throws nothing or something else. */
export function thrown(fn: () => unknown): PoiseError {
  try {
    fn();
  } catch (err) {
    if (err instanceof PoiseError) return err;
    throw err;
  }
  throw new Error('expected a PoiseError');
}
