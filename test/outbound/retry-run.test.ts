/**
 * How a run that found no backend says why (`RetryRun.reason`), which the
 * proxy's refusal classification reads (proxy/termination.ts): the last
 * connect's timeout — ours (`ConnectTimeout`) or the kernel's (`ETIMEDOUT`)
 * — is `ConnectTimeout` (connect-timeout, sC, counted a timeout); any other
 * connect error is `NoEligibleCandidates`.
 */
import { describe, expect, it } from 'vitest';
import { PoiseError, type PoiseErrorCode } from '../../src/core/errors.js';
import { connectTimeout, isConnectTimeout, RetryRun } from '../../src/outbound/retry-run.js';
import { refusalReason, refusalTermination, TERMINATIONS } from '../../src/proxy/termination.js';
import { routerOver } from '../helpers/runtime.js';

const errno = (code: string): NodeJS.ErrnoException => Object.assign(new Error(`connect ${code} 127.0.0.1:7000`), { code });

/** A run over two backends whose every connect fails with `fail(i)` (i: the attempt); its end and reason. */
function runFailing(attempts: number, fail: (i: number) => unknown): { end: Error; reason: PoiseErrorCode | undefined; tries: number } {
  const run = new RetryRun('connect', { router: routerOver(['a', 'b']), key: undefined, priority: undefined, attempts });
  let next = run.acquire();
  for (let i = 0; ; i++) {
    if (next instanceof Error) return { end: next, reason: run.reason, tries: run.tries };
    run.started();
    next = run.failed(next, fail(i));
  }
}

describe('RetryRun.reason after failed connects', () => {
  it.each([
    { name: 'our ConnectTimeout', err: () => connectTimeout('127.0.0.1', 7000, 1000) },
    { name: "the kernel's ETIMEDOUT", err: () => errno('ETIMEDOUT') },
  ])('the last connect timed out ($name): ConnectTimeout, a connect-timeout refusal (sC) counted as a timeout', ({ err }) => {
    for (const attempts of [1, 2]) {
      const { end, reason, tries } = runFailing(attempts, err);
      expect(tries).toBe(attempts);
      expect(end).toBeInstanceOf(PoiseError);
      expect((end as PoiseError).code).toBe('NoEligibleCandidates');
      expect(reason).toBe('ConnectTimeout');
      expect(refusalTermination(reason)).toBe('connect-timeout');
      expect(TERMINATIONS[refusalTermination(reason)]).toBe('sC');
      expect(refusalReason(reason)).toBe('timeout');
    }
  });

  it('the last connect was refused (after a timeout): NoEligibleCandidates, connect-failed (SC), no backend', () => {
    const { reason } = runFailing(2, (i) => errno(i === 0 ? 'ETIMEDOUT' : 'ECONNREFUSED'));
    expect(reason).toBe('NoEligibleCandidates');
    expect(TERMINATIONS[refusalTermination(reason)]).toBe('SC');
    expect(refusalReason(reason)).toBe('no_backend');
  });

  it('isConnectTimeout: ConnectTimeout and ETIMEDOUT only', () => {
    expect(isConnectTimeout(connectTimeout('h', 1, 5))).toBe(true);
    expect(isConnectTimeout(errno('ETIMEDOUT'))).toBe(true);
    for (const e of [
      errno('ECONNREFUSED'),
      errno('EHOSTUNREACH'),
      new PoiseError('NoEligibleCandidates', 'x'),
      new Error('ETIMEDOUT'),
      undefined,
      null,
      'ETIMEDOUT',
    ])
      expect(isConnectTimeout(e)).toBe(false);
  });
});
