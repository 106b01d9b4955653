import { describe, expect, it } from 'vitest';
import { POISE_ERROR_CODES, PoiseError, isPoiseError } from '../../src/core/errors.js';

describe('PoiseError', () => {
  it('is recognised by brand across two copies of the module (instanceof and isPoiseError)', async () => {
    // A second copy of the package, as when it is installed twice: the same file under another URL is another module instance.
    const secondCopy: string = '../../src/core/errors.js?second-copy';
    const other = (await import(secondCopy)) as typeof import('../../src/core/errors.js');
    expect(other.PoiseError).not.toBe(PoiseError);
    const foreign = new other.PoiseError('Conflict', 'stored version 3, expected 2');
    expect(foreign instanceof PoiseError).toBe(true);
    expect(isPoiseError(foreign, 'Conflict')).toBe(true);
    expect(isPoiseError(foreign, 'NotFound')).toBe(false);
    expect(other.isPoiseError(new PoiseError('Closed', 'closed'))).toBe(true);
  });

  it('a plain Error, an error-shaped object or a look-alike with the same name is not a PoiseError', () => {
    const lookalike = Object.assign(new Error('x'), { name: 'PoiseError', code: 'Empty' });
    expect(isPoiseError(lookalike)).toBe(false);
    expect(isPoiseError({ code: 'Empty', message: 'x' })).toBe(false);
    expect(isPoiseError(null)).toBe(false);
    expect(isPoiseError('Empty')).toBe(false);
  });

  it('lists every code once', () => {
    expect(new Set(POISE_ERROR_CODES).size).toBe(POISE_ERROR_CODES.length);
    expect(POISE_ERROR_CODES).toEqual(expect.arrayContaining(['Conflict', 'NotFound', 'Closed', 'CapacityExhausted', 'Unavailable']));
  });
});
