/**
 * The header of an attachable shared buffer (src/core/shared-header.ts): a
 * stamped buffer opens with its magic and sizes; another magic, another
 * size that matters, a buffer too small for a header or a plain
 * ArrayBuffer is refused, naming the field.
 */
import { describe, expect, it } from 'vitest';
import { HEADER_WORDS, openStamped, stampedBuffer } from '../../src/core/shared-header.js';

describe('shared header', () => {
  it('opens what it stamped: sizes at words 1.., the body after the header, zeroed', () => {
    const buffer = stampedBuffer(0x1234, [7, 9], 5);
    expect(buffer.byteLength).toBe((HEADER_WORDS + 5) * 4);
    const i32 = openStamped(buffer, 'x.attach(buffer)', 'an X', 0x1234, [undefined, 9]);
    expect([...i32.subarray(0, 3)]).toEqual([0x1234, 7, 9]);
    expect([...i32.subarray(HEADER_WORDS)]).toEqual([0, 0, 0, 0, 0]);
  });

  it('refuses another magic, a size that differs, a buffer too small, and a non-shared buffer', () => {
    const buffer = stampedBuffer(0x1234, [7, 9], 5);
    expect(() => openStamped(buffer, 'f', 'an X', 0x1235, [])).toThrow('buffer: is not an X buffer of this poise-lb version');
    expect(() => openStamped(buffer, 'f', 'an X', 0x1234, [undefined, 8])).toThrow('buffer: is not an X buffer');
    expect(() => openStamped(new SharedArrayBuffer(8), 'f', 'an X', 0, [])).toThrow('buffer: is not an X buffer');
    expect(() => openStamped(new ArrayBuffer(64), 'x.attach(buffer)', 'an X', 0x1234, [])).toThrow(
      'x.attach(buffer): must be a SharedArrayBuffer',
    );
  });
});
