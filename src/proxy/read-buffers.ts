/**
 * Read buffers of the proxy's upstream sockets: what a backend sends is read
 * into memory the proxy owns, not into a fresh allocation per read.
 *
 * A plain Node socket reads every chunk into a new 64 KiB `malloc` that is
 * shrunk to the bytes read and freed when V8 collects the Buffer. Under bulk
 * transfers that is a 64 KiB allocation per read, and freed chunks pile up in
 * glibc's per-thread arenas (the RSS a bare Node proxy keeps after moving
 * 16 MiB bodies: 326 MiB on Node 24 with two threads); under small replies it
 * is a malloc, a realloc and an external backing store per reply.
 *
 * Node's `onread` socket option reads into a caller's buffer instead and
 * asks a generator for the buffer of the next read right after each
 * callback. Two modes per socket, switched between reads:
 *
 * - **Shared** (every upstream socket starts here): one 64 KiB buffer per
 *   thread, read into by every upstream socket of the thread. The callback
 *   copies the bytes out (`Buffer.allocUnsafe`: a slice of Node's 8 KiB pool
 *   for a small reply) before anything else can read into it, so no pending
 *   write ever points at it. An idle connection holds no buffer.
 * - **Own** (after a read of at least {@link BULK_READ} bytes: a bulk
 *   transfer): the socket reads into a buffer of its own, taken from a
 *   per-thread free list, and the bytes are written on without a copy. A
 *   write Node could not finish at once keeps pointing at that buffer
 *   (libuv writes from it later), so the next read goes into another one
 *   and the first is lent until the client's write queue is empty (a write
 *   this large returned false and paused the socket, so one lend per pause).
 *   A small read is copied out and returns the socket to the shared buffer:
 *   lent, 16 KiB of small replies to a stalled client would hold a 64 KiB
 *   buffer each before the client's write queue pauses the socket.
 *
 * Node calls the generator without the socket (`bufGen()`), right after
 * the callback, in the same `onStreamRead`: the callback leaves the next
 * buffer in {@link handOver}, the generator takes it (and leaves the shared
 * buffer for a socket's first read, at its creation).
 */

/** Bytes per read buffer: Node's own read size. */
export const READ_SIZE = 64 * 1024;
/** A read this large makes its socket read into a buffer of its own. */
export const BULK_READ = 16 * 1024;
/** Free buffers a thread keeps for reuse (2 MiB); beyond that a returned buffer is left to the GC. */
export const FREE_MAX = 32;

const shared = Buffer.allocUnsafeSlow(READ_SIZE);
const free: Buffer[] = [];
let next: Buffer = shared;
/** Own buffers taken and not given back: a socket reads into each, or a write points at it. */
let out = 0;
/** Own buffers ever allocated (the free list was empty), and ever taken. */
let allocated = 0;
let taken = 0;
/** Reads whose buffer a pending write kept (see {@link lendReadBuffer}). */
let lends = 0;

/** The thread's shared read buffer. */
export function sharedReadBuffer(): Buffer {
  return shared;
}

/** A buffer of its own for a socket: from the free list, or a new one. */
export function takeReadBuffer(): Buffer {
  out++;
  taken++;
  const b = free.pop();
  if (b !== undefined) return b;
  allocated++;
  return Buffer.allocUnsafeSlow(READ_SIZE);
}

/**
 * The buffer a socket just read into stays with a client write Node could
 * not finish at once: counts the lend and takes the socket's next buffer.
 */
export function lendReadBuffer(): Buffer {
  lends++;
  return takeReadBuffer();
}

/** Gives a buffer back for reuse; no socket may read into it and no write may point at it any more. */
export function giveReadBuffer(buf: Buffer): void {
  if (buf === shared) return;
  out--;
  if (free.length < FREE_MAX) free.push(buf);
}

/** This thread's own read buffers: taken and not given back (`out`), ever taken, ever allocated, lent to pending writes, on the free list. */
export function readBufferStats(): { out: number; taken: number; allocated: number; lends: number; free: number } {
  return { out, taken, allocated, lends, free: free.length };
}

/** Called at the end of a read callback: the buffer the same socket reads into next. */
export function handOver(buf: Buffer): void {
  next = buf;
}

/**
 * The `onread.buffer` generator: the buffer the last callback handed over,
 * else (a socket's creation) the shared one.
 */
export function nextReadBuffer(): Buffer {
  const b = next;
  next = shared;
  return b;
}
