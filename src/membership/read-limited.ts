/**
 * Reading a document file with a size cap. A file is read through its own
 * descriptor, at most `maxBytes + 1` bytes, so an endless or huge input
 * (`/dev/zero`, a log file given by mistake) costs one bounded buffer and is
 * refused with "exceeds N bytes" instead of exhausting memory.
 */
import { open } from 'node:fs/promises';
import { PoiseError } from '../core/errors.js';

/** Throws the `InvalidConfig` of an input larger than `maxBytes`. */
function tooLarge(field: string, what: string, maxBytes: number): never {
  throw new PoiseError('InvalidConfig', `${field}: ${what} exceeds the limit of ${maxBytes} bytes`, { field });
}

/**
 * The UTF-8 text of `file`, read up to `maxBytes`. Throws `InvalidConfig`
 * (field `field`) when the file holds more; `NotFound` when it does not
 * exist; `Unavailable` for any other read failure (permissions, a
 * directory, I/O), each naming the file.
 *
 * @example
 * const text = await readFileLimited('/etc/poise/members.yaml', 1 << 20, 'input.file');
 */
export async function readFileLimited(file: string, maxBytes: number, field: string): Promise<string> {
  let handle;
  try {
    handle = await open(file, 'r');
  } catch (err) {
    throw readError(file, field, err);
  }
  try {
    const buf = Buffer.allocUnsafe(maxBytes + 1);
    let length = 0;
    while (length < buf.length) {
      const { bytesRead } = await handle.read(buf, length, buf.length - length, null);
      if (bytesRead === 0) break;
      length += bytesRead;
    }
    if (length > maxBytes) tooLarge(field, JSON.stringify(file), maxBytes);
    return buf.toString('utf8', 0, length);
  } catch (err) {
    if (err instanceof PoiseError) throw err;
    throw readError(file, field, err);
  } finally {
    await handle.close();
  }
}

/**
 * Reads a stream as UTF-8 text up to `maxBytes` — a Node `Readable` (stdin)
 * or a web `ReadableStream` (a fetch body); refuses more with
 * `InvalidConfig` ("`field`: `what` exceeds the limit of N bytes"), having
 * read at most `maxBytes` plus one chunk. Leaving the loop early cancels the
 * stream (its async iterator's `return`). A stream that fails rejects with
 * its own error.
 */
export async function readStreamLimited(
  stream: AsyncIterable<Uint8Array | string>,
  maxBytes: number,
  field: string,
  what = 'standard input',
): Promise<string> {
  const chunks: Buffer[] = [];
  let length = 0;
  for await (const chunk of stream) {
    const b = typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    length += b.length;
    if (length > maxBytes) tooLarge(field, what, maxBytes);
    chunks.push(b);
  }
  return Buffer.concat(chunks, length).toString('utf8');
}

function readError(file: string, field: string, err: unknown): PoiseError {
  const e = err as NodeJS.ErrnoException;
  const code = e.code === 'ENOENT' ? 'NotFound' : 'Unavailable';
  return new PoiseError(code, `${field}: cannot read ${JSON.stringify(file)}: ${e.message}`, { field, cause: err });
}
