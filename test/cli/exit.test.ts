import { describe, expect, it } from 'vitest';
import { EXIT, exitCodeOf } from '../../src/cli/exit.js';
import { UsageError } from '../../src/cli/usage.js';
import { POISE_ERROR_CODES, PoiseError, type PoiseErrorCode } from '../../src/core/errors.js';

describe('exit codes: one table from error code to exit code', () => {
  const expected: Record<PoiseErrorCode, number> = {
    InvalidConfig: 3,
    InvalidWeight: 3,
    DuplicateIdentity: 3,
    InconsistentTopology: 3,
    WeightOverflow: 3,
    NotFound: 4,
    Conflict: 5,
    CapacityExhausted: 6,
    Corrupt: 7,
    NotReplicated: 8,
    Unavailable: 1,
    Closed: 1,
    Overloaded: 1,
    Empty: 1,
    NoEligibleCandidates: 1,
    PanicRejected: 1,
    QueueFull: 1,
    QueueTimeout: 1,
    Cancelled: 1,
    ReplicaLag: 1,
    NotReady: 1,
    ConnectTimeout: 1,
    LocalResource: 1,
  };

  it.each(POISE_ERROR_CODES.map((c) => [c]))('%s → its documented exit code, whatever the message says', (code) => {
    // The message deliberately reads like another row: the code alone decides.
    expect(exitCodeOf(new PoiseError(code, 'no backend "x"; not newer; ifVersion'))).toBe(expected[code]);
  });

  it('a usage error is 2; anything else is a runtime failure (1); the named codes are stable', () => {
    expect(exitCodeOf(new UsageError('--capacity: must be an integer in [1, 65536], got "0"', '--capacity'))).toBe(2);
    expect(exitCodeOf(new Error('boom'))).toBe(1);
    expect(exitCodeOf(new RangeError('x'))).toBe(1);
    expect(exitCodeOf('a string')).toBe(1);
    expect(EXIT).toEqual({ ok: 0, failure: 1, usage: 2, rejected: 3, notFound: 4, conflict: 5, capacity: 6, corrupt: 7, notReplicated: 8 });
  });

  it('a PoiseError of another copy of the package maps by its code; an unknown code is a runtime failure', async () => {
    // The same file under another URL is another module instance, as when the package is installed twice.
    const secondCopy: string = '../../src/core/errors.js?second-copy';
    const other = (await import(secondCopy)) as typeof import('../../src/core/errors.js');
    expect(exitCodeOf(new other.PoiseError('Conflict', 'x'))).toBe(5);
    expect(exitCodeOf(new other.PoiseError('FromTheFuture' as PoiseErrorCode, 'x'))).toBe(1);
  });
});
