/**
 * The header of a shared buffer that threads attach to (ProxyCounters,
 * HttpCounters): word 0 a magic number naming the layout and its version,
 * words 1.. the sizes the layout was made with. The creator stores the
 * sizes first and the magic last, before the buffer is shared; an attacher
 * checks the magic and the sizes it depends on, so a buffer of another
 * kind or version is refused with an `InvalidConfig` instead of misread.
 */
import { invalidConfig } from './errors.js';

/** Words every header takes (one 64-byte line), before the body. */
export const HEADER_WORDS = 16;

/** A zeroed SharedArrayBuffer of a header and `bodyWords` words, its header holding `magic` and `sizes` (words 1..). */
export function stampedBuffer(magic: number, sizes: readonly number[], bodyWords: number): SharedArrayBuffer {
  const buffer = new SharedArrayBuffer((HEADER_WORDS + bodyWords) * 4);
  const i32 = new Int32Array(buffer);
  // Written before the buffer is shared; the magic last, so a header that shows it is complete.
  for (let k = 0; k < sizes.length; k++) Atomics.store(i32, 1 + k, sizes[k]!);
  Atomics.store(i32, 0, magic);
  return buffer;
}

/**
 * The words of `buffer` (given as `field`) if its header holds `magic` and,
 * for each entry of `expect` that is a number, that size at its word
 * (1..); `kind` names the layout in the refusal.
 */
export function openStamped(
  buffer: unknown,
  field: string,
  kind: string,
  magic: number,
  expect: readonly (number | undefined)[],
): Int32Array {
  if (!(buffer instanceof SharedArrayBuffer)) invalidConfig(field, 'must be a SharedArrayBuffer', buffer);
  const i32 = new Int32Array(buffer);
  // Loaded through Atomics like every shared word (written once, before sharing).
  let ok = i32.length >= HEADER_WORDS && Atomics.load(i32, 0) === magic;
  for (let k = 0; ok && k < expect.length; k++) if (expect[k] !== undefined && Atomics.load(i32, 1 + k) !== expect[k]) ok = false;
  if (!ok) invalidConfig('buffer', `is not ${kind} buffer of this poise-lb version`);
  return i32;
}
