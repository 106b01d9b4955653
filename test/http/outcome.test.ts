import { describe, expect, it } from 'vitest';
import { defaultStatusOutcome, errorOutcome, isIdempotent, isReplayable } from '../../src/http/outcome.js';
import { PoiseError } from '../../src/core/errors.js';
import { Readable } from 'node:stream';

const err = (code: string): Error => Object.assign(new Error(code), { code });

describe('what an attempt says about its backend', () => {
  it.each([
    // the backend's or the network's
    ['ECONNREFUSED', 'failure'],
    ['ECONNRESET', 'failure'],
    ['EPIPE', 'failure'],
    ['ETIMEDOUT', 'failure'],
    ['EHOSTUNREACH', 'failure'],
    ['ENOTFOUND', 'failure'],
    ['UND_ERR_SOCKET', 'failure'],
    ['UND_ERR_CONNECT_TIMEOUT', 'failure'],
    ['UND_ERR_HEADERS_TIMEOUT', 'failure'],
    ['UND_ERR_BODY_TIMEOUT', 'failure'],
    // a response body cut short of its content-length: the backend closed or reset mid-body
    ['UND_ERR_RES_CONTENT_LENGTH_MISMATCH', 'failure'],
    ['HPE_INVALID_CONSTANT', 'failure'],
    ['ERR_TLS_CERT_ALTNAME_INVALID', 'failure'],
    ['DEPTH_ZERO_SELF_SIGNED_CERT', 'failure'],
    // this host's resources: never the backend's
    ['EMFILE', 'cancelled'],
    ['ENOBUFS', 'cancelled'],
    ['EADDRNOTAVAIL', 'cancelled'],
    // the caller's: an abort, its own bad options, its body stream
    ['UND_ERR_ABORTED', 'cancelled'],
    ['ABORT_ERR', 'cancelled'],
    ['UND_ERR_INVALID_ARG', 'cancelled'],
    ['UND_ERR_REQ_CONTENT_LENGTH_MISMATCH', 'cancelled'],
    ['UND_ERR_DESTROYED', 'cancelled'],
    ['UND_ERR_CLOSED', 'cancelled'],
  ])('%s → %s', (code, outcome) => {
    expect(errorOutcome(err(code))).toBe(outcome);
  });

  it('an error without a code (an AbortSignal reason, a thrown string) or a PoiseError is the caller’s: cancelled', () => {
    expect(errorOutcome(new DOMException('aborted', 'AbortError'))).toBe('cancelled');
    expect(errorOutcome('boom')).toBe('cancelled');
    expect(errorOutcome(null)).toBe('cancelled');
    expect(errorOutcome(new PoiseError('InvalidConfig', 'x'))).toBe('cancelled');
  });

  it('5xx is a failure by default, 1xx–4xx a success', () => {
    expect([100, 200, 204, 301, 404, 429, 499, 500, 503, 599].map(defaultStatusOutcome)).toEqual([
      'success',
      'success',
      'success',
      'success',
      'success',
      'success',
      'success',
      'failure',
      'failure',
      'failure',
    ]);
  });

  it('idempotent: GET HEAD OPTIONS PUT DELETE, unless undici’s idempotent flag says otherwise', () => {
    const methods = ['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE', 'POST', 'PATCH', 'CONNECT', 'TRACE', 'get'];
    expect(methods.filter((m) => isIdempotent(m, undefined))).toEqual(['GET', 'HEAD', 'OPTIONS', 'PUT', 'DELETE']);
    expect(isIdempotent('POST', true)).toBe(true);
    expect(isIdempotent('GET', false)).toBe(false);
  });

  it('replayable: no body, a string, bytes; never a stream, an iterable or a FormData', () => {
    expect([undefined, null, '', 'x', Buffer.from('x'), new Uint8Array(2)].every(isReplayable)).toBe(true);
    async function* gen(): AsyncGenerator<string> {
      yield 'x';
    }
    expect([Readable.from(['x']), gen(), new FormData(), [Buffer.from('x')], new Blob(['x'])].some(isReplayable)).toBe(false);
  });
});
