/**
 * The process clock's ticker thread, in the module modes a user's process
 * can run in: it must tick, and never crash its host process.
 */
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';

const RUNTIME = new URL('../../dist/src/runtime.js', import.meta.url).href;

describe('the shared clock ticker', () => {
  // A process started with --input-type=module: an eval'd CommonJS ticker threw there
  // ("require is not defined in ES module scope") and its worker 'error' killed the process.
  it.each([
    ['--input-type=module', `import { Balancer } from ${JSON.stringify(RUNTIME)};`],
    ['--input-type=commonjs', `const { Balancer } = require(${JSON.stringify(RUNTIME.replace('file://', ''))});`],
  ])('ticks under %s and the process exits 0', (flag, load) => {
    const script = `${load}
const b = new Balancer({ capacity: 4 });
b.update([{ id: 'a', address: '127.0.0.1:7001' }]);
const clock = new Int32Array(b.attachment().clock);
const t0 = Atomics.load(clock, 0);
// Poll until the ticker has stored a later time (a thread starting on a loaded machine may take a while), at most 10 s.
const deadline = Date.now() + 10000;
const poll = () => {
  const moved = Atomics.load(clock, 0) - t0;
  if (moved > 0 || Date.now() > deadline) { process.stdout.write(String(moved)); b.close(); }
  else setTimeout(poll, 20);
};
poll();
`;
    const out = execFileSync(process.execPath, [flag, '-e', script], { encoding: 'utf8' });
    // The ticker stored a later time at least once (it runs), and the process exited 0 (execFileSync throws otherwise).
    expect(Number(out)).toBeGreaterThan(0);
  });
});
