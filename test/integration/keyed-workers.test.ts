// Keyed routers in two real worker threads (compiled build: run `npm run build`
// first) and in a restarted process agree on every key's backend.
import { execFileSync } from 'node:child_process';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { Backend, Maglev, RingHash } from '../../dist/src/index.js';
import { Balancer, createLogger } from '../../dist/src/runtime.js';

const FIXTURE = new URL('../fixtures/worker-keyed.mjs', import.meta.url);
const RUNTIME = new URL('../../dist/src/runtime.js', import.meta.url).href;
const KEYS = Array.from({ length: 3000 }, (_, i) => (i % 4 === 0 ? `tenant-${i}` : `session-${String(i).padStart(8, '0')}`));
const MEMBERS = Array.from({ length: 9 }, (_, i) => ({ id: `cache-${i}`, address: `127.0.0.1:${7100 + i}`, weight: 1 + (i % 3) }));

function run(balancer: Balancer, policy: string): Promise<string[]> {
  const w = new Worker(FIXTURE, { workerData: { attachment: balancer.attachment(), policy, keys: KEYS } });
  balancer.watchWorker(w);
  return new Promise((resolve, reject) => {
    w.once('message', (ids: string[]) => {
      void w.terminate();
      resolve(ids);
    });
    w.once('error', reject);
  });
}

/** The same membership published in a fresh process (a restart), its picks for KEYS. */
function restarted(policy: string): string[] {
  const child = `
import { Balancer, createLogger } from ${JSON.stringify(RUNTIME)};
const b = new Balancer({ capacity: 16 });
b.update(${JSON.stringify([...MEMBERS].reverse())});
const r = b.router({ policy: ${JSON.stringify(policy)}, logger: createLogger({ level: 'silent' }) });
const keys = ${JSON.stringify(KEYS)};
process.stdout.write(JSON.stringify(keys.map((key) => { const l = r.acquire({ key }); const id = l.id; l.release('cancelled'); return id; })));
b.close();
`;
  return JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', child], { encoding: 'utf8' })) as string[];
}

describe.each([
  ['maglev', () => new Maglev()],
  ['ring-hash', () => new RingHash()],
])('%s routers agree on every key', (policy, standalone) => {
  it('in two worker threads, in a restarted process, and with the standalone policy over the same members', async () => {
    const balancer = new Balancer({ capacity: 16 });
    balancer.update(MEMBERS);
    const [a, b] = await Promise.all([run(balancer, policy), run(balancer, policy)]);
    expect(a).toEqual(b);
    expect(restarted(policy)).toEqual(a);
    const p = standalone();
    const slice = MEMBERS.map((m) => new Backend(m.id, { weight: m.weight }));
    expect(KEYS.map((key) => slice[p.pick(slice, { key })]!.id)).toEqual(a);
    expect(new Set(a).size).toBe(MEMBERS.length);
    balancer.close();
  }, 60_000);
});

describe('bounded routers over the shared table', () => {
  it.each(['maglev:bounded', 'ring-hash:bounded'])(
    '%s: held leases never pass ⌈1.25 × average⌉ on any backend, read from the table totals',
    (policy) => {
      const balancer = new Balancer({ capacity: 16 });
      balancer.update(MEMBERS.map((m) => ({ ...m, weight: 1 })));
      const router = balancer.router({ policy: policy as never, logger: createLogger({ level: 'silent' }) });
      const n = MEMBERS.length;
      const leases = [];
      // Hot keys: 40 % of the leases ask for one key, which alone would pile onto one backend.
      for (let k = 0; k < 2000; k++) {
        const lease = router.acquire({ key: k % 5 < 2 ? 'hot' : `key-${k}` });
        leases.push(lease);
        let total = 0;
        let max = 0;
        for (let s = 0; s < n; s++) {
          const v = balancer.table.outstanding(s);
          total += v;
          max = Math.max(max, v);
        }
        expect(total).toBe(k + 1);
        expect(max).toBeLessThanOrEqual(Math.ceil((1.25 * total) / n));
      }
      for (const l of leases) l.release('success');
      for (let s = 0; s < n; s++) expect(balancer.table.outstanding(s)).toBe(0);
      balancer.close();
    },
  );
});
