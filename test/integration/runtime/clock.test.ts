/**
 * The process clock's ticker thread: it ticks in the module modes a user's
 * process can run in without crashing its host, sleeps when nobody reads,
 * and a read stays exact (to the millisecond) and never goes backwards
 * across its sleeps.
 */
import { execFileSync } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { describe, expect, it, onTestFinished } from 'vitest';
import { TIME_MASK, elapsedMs } from '../../../src/core/time.js';
import {
  CLOCK_ASLEEP,
  CLOCK_FRESH,
  type ClockTicker,
  type TickerThread,
  clockReader,
  directClock,
  processClockBuffer,
  startClock,
} from '../../../src/runtime/clock.js';
import { until } from '../../helpers/until.js';

const RUNTIME = new URL('../../../dist/src/runtime.js', import.meta.url).href;
const CLOCK = new URL('../../../dist/src/runtime/clock.js', import.meta.url).href;

describe('the shared clock ticker', () => {
  // A process started with --input-type=module: an eval'd CommonJS ticker threw there
  // ("require is not defined in ES module scope") and its worker 'error' killed the process.
  it.each([
    ['--input-type=module', `import { Balancer } from ${JSON.stringify(RUNTIME)};\nimport { clockReader } from ${JSON.stringify(CLOCK)};`],
    [
      '--input-type=commonjs',
      `const { Balancer } = require(${JSON.stringify(RUNTIME.replace('file://', ''))});\nconst { clockReader } = require(${JSON.stringify(CLOCK.replace('file://', ''))});`,
    ],
  ])('ticks under %s and the process exits 0', (flag, load) => {
    const script = `${load}
const b = new Balancer({ capacity: 4 });
b.update([{ id: 'a', address: '127.0.0.1:7001' }]);
const buf = b.attachment().clock;
const words = new Int32Array(buf);
// A read marks the word FRESH (or, the ticker asleep or not started yet, stores the time with FRESH).
clockReader(buf)();
// Only the ticker stores a time without FRESH: poll until it has (a thread starting on a loaded machine may take a while), at most 10 s.
const deadline = Date.now() + 10000;
const poll = () => {
  const ticked = (Atomics.load(words, 0) & ${CLOCK_FRESH}) === 0;
  if (ticked || Date.now() > deadline) { process.stdout.write(ticked ? 'ticked' : 'silent'); b.close(); }
  else setTimeout(poll, 20);
};
poll();
`;
    const out = execFileSync(process.execPath, [flag, '-e', script], { encoding: 'utf8' });
    // The ticker stored a time (it runs), and the process exited 0 (execFileSync throws otherwise).
    expect(out).toBe('ticked');
  });

  it('a process whose clock ticks on its event loop (poise proxy) exits on its own, awake or asleep', () => {
    const script = `import { useProcessClockTicker, clockReader, processClockBuffer } from ${JSON.stringify(CLOCK)};
if (!useProcessClockTicker('loop')) throw new Error('too late');
const buf = processClockBuffer();
const now = clockReader(buf);
const words = new Int32Array(buf);
// Keep it awake for a while (reads), then let it fall asleep; nothing else holds the loop.
const t0 = now();
const until = setInterval(() => {
  if (now() - t0 < 30) return;
  clearInterval(until);
  process.stdout.write((Atomics.load(words, 0) & ${CLOCK_FRESH}) === 0 ? 'ticked' : 'fresh');
}, 1);
`;
    // execFileSync returns only once the process exits: neither the timer nor the waitAsync holds it.
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
    expect(['ticked', 'fresh']).toContain(out);
  });

  it('on the event loop: a read in another thread wakes the sleeping ticker while the owner thread idles', () => {
    // The owner does nothing but wait for the worker's message: the waitAsync must resolve
    // from the worker's notify alone. The worker reads once with the ticker asleep, then waits
    // (Atomics.wait, 10 s at most) for the ticker's own store, which clears FRESH.
    const script = `import { Worker } from 'node:worker_threads';
import { useProcessClockTicker, processClockBuffer } from ${JSON.stringify(CLOCK)};
useProcessClockTicker('loop');
const buf = processClockBuffer();
const words = new Int32Array(buf);
const src = \`
import { workerData, parentPort } from 'node:worker_threads';
import { clockReader } from \${JSON.stringify(${JSON.stringify(CLOCK)})};
const words = new Int32Array(workerData);
const deadline = Date.now() + 10000;
while ((Atomics.load(words, 0) & ${CLOCK_ASLEEP}) === 0 && Date.now() < deadline) Atomics.wait(words, 1, 0, 5);
const asleep = (Atomics.load(words, 0) & ${CLOCK_ASLEEP}) !== 0;
clockReader(workerData)();
let v = Atomics.load(words, 0);
while ((v & ${CLOCK_FRESH}) !== 0 && Date.now() < deadline) { Atomics.wait(words, 0, v, 50); v = Atomics.load(words, 0); }
parentPort.postMessage(asleep && (v & ${CLOCK_FRESH}) === 0 ? 'woken' : asleep ? 'still asleep' : 'never slept');
\`;
const w = new Worker(new URL('data:text/javascript,' + encodeURIComponent(src)), { workerData: buf });
w.once('message', (m) => { process.stdout.write(m); w.terminate(); });
`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8', timeout: 20_000 });
    expect(out).toBe('woken');
  });
});

describe.each<[ClockTicker, () => SharedArrayBuffer]>([
  ['thread', processClockBuffer],
  ['loop', () => startClock('loop')],
])('the shared clock ticking on its %s', (_ticker, make) => {
  const buffer = make();
  const words = new Int32Array(buffer);
  const origin = new Float64Array(buffer, 8, 1)[0]!;
  /** The clock's source read directly: CLOCK_MONOTONIC ms since the buffer's origin. */
  const source = (): number => Number(process.hrtime.bigint()) / 1e6 - origin;
  const asleep = (): boolean => (Atomics.load(words, 0) & CLOCK_ASLEEP) !== 0;

  it('sleeps once a tick passed without a read, and stays asleep (the word unchanged) while nobody reads', async () => {
    clockReader(buffer)();
    await until(asleep, 'the ticker to sleep after a tick without a read');
    const word = Atomics.load(words, 0);
    // 50 ms of the source's time with no read: an awake ticker would have stored 50 times.
    const t = source();
    await until(() => source() - t >= 50, '50 ms to pass');
    expect(Atomics.load(words, 0)).toBe(word);
  });

  it('a read while it sleeps is the source time (exact to the ms), stored with FRESH, and wakes the ticker', async () => {
    const now = clockReader(buffer);
    now();
    await until(asleep, 'the ticker to sleep');
    const stale = Atomics.load(words, 0) & TIME_MASK;
    await until(() => source() - stale >= 5, 'the stale word to be 5 ms behind the source');
    const before = Math.floor(source());
    const read = now();
    const after = Math.floor(source());
    // Not the stale word (5 ms behind): the source, read between before and after
    // (within 1 ms: this thread reads it through performance.now(), the test through hrtime).
    expect(elapsedMs(read, before & TIME_MASK)).toBeGreaterThanOrEqual(-1);
    expect(elapsedMs(after & TIME_MASK, read)).toBeGreaterThanOrEqual(-1);
    expect(elapsedMs(read, stale)).toBeGreaterThanOrEqual(4);
    // The ticker woke and stored on its own (only its stores clear FRESH), or slept again after that.
    await until(() => (Atomics.load(words, 0) & CLOCK_FRESH) === 0, 'the woken ticker to store');
  });

  it('a direct clock reads the same time line without touching the word: the ticker sleeps through 200,000 direct reads', async () => {
    const shared = clockReader(buffer);
    const direct = directClock(buffer);
    shared();
    await until(asleep, 'the ticker to sleep');
    const word = Atomics.load(words, 0);
    let last = direct();
    for (let i = 0; i < 200_000; i++) {
      const t = direct();
      expect(elapsedMs(t, last)).toBeGreaterThanOrEqual(0);
      last = t;
    }
    // Not one mark, not one wake: the word is the one the ticker left when it went to sleep.
    expect(Atomics.load(words, 0)).toBe(word);
    // The source's time, between two reads of the source (the test reads it through hrtime, the clock through
    // performance.now(): within 1 ms of either bracket however long this thread is preempted between them).
    const before = Math.floor(source()) & TIME_MASK;
    const d = direct();
    const after = Math.ceil(source()) & TIME_MASK;
    expect(elapsedMs(d, before)).toBeGreaterThanOrEqual(-1);
    expect(elapsedMs(after, d)).toBeGreaterThanOrEqual(-1);
    // The shared word (ticker woken by these reads) is never ahead of the direct time read after it (by more than
    // the rounding of two reads of one source at a millisecond's edge): one time line, one origin.
    for (let i = 0; i < 50; i++) {
      const s = shared();
      expect(elapsedMs(direct(), s)).toBeGreaterThanOrEqual(-1);
      await new Promise((r) => setTimeout(r, 1));
    }
  });

  it('never goes backwards across 40 sleeps and wakes, from two readers', async () => {
    const a = clockReader(buffer);
    const b = clockReader(buffer);
    let last = a();
    for (let round = 0; round < 40; round++) {
      for (let i = 0; i < 2000; i++) {
        const t = i % 2 === 0 ? a() : b();
        expect(elapsedMs(t, last)).toBeGreaterThanOrEqual(0);
        last = t;
      }
      await until(asleep, `sleep ${round}`);
    }
    // And the last read is the source's time to the millisecond.
    const read = a();
    expect(Math.abs(elapsedMs(Math.floor(source()) & TIME_MASK, read))).toBeLessThanOrEqual(1);
  });
});

describe('a ticker thread that cannot start', () => {
  it('neither ends the process nor freezes the clock: one warning, and the event loop ticks the buffer', async () => {
    // A Worker that fails to start emits 'error' after its construction returned
    // (ERR_WORKER_INIT_FAILED: EMFILE under a low `ulimit -n`, seen in `poise proxy`).
    const thread = new EventEmitter() as EventEmitter & TickerThread;
    let unrefs = 0;
    thread.unref = () => void unrefs++;
    const warnings: Error[] = [];
    const onWarning = (w: Error): void => void warnings.push(w);
    process.on('warning', onWarning);
    onTestFinished(() => void process.off('warning', onWarning));
    const buffer = startClock('thread', () => thread);
    const words = new Int32Array(buffer);
    // Without a listener this emit throws (the process's uncaught exception in a real Worker).
    thread.emit('error', Object.assign(new Error('Worker initialization failure: EMFILE'), { code: 'ERR_WORKER_INIT_FAILED' }));
    await until(() => warnings.length > 0, 'the warning');
    expect(warnings.map((w) => (w as Error & { code?: string }).code)).toEqual(['POISE_CLOCK_TICKER']);
    expect(warnings[0]!.message).toContain('Worker initialization failure: EMFILE');
    expect(unrefs).toBe(1);
    // The clock moves: a read marks the word FRESH, and only a ticker's store clears it — 20 times over.
    const now = clockReader(buffer);
    for (let i = 0; i < 20; i++) {
      const t = now();
      await until(() => (Atomics.load(words, 0) & CLOCK_FRESH) === 0 && elapsedMs(now(), t) >= 1, `tick ${i} of the loop ticker`);
    }
  });
});
