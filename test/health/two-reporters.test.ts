// The agent's weight and ORCA's weight are two words with one writer each
// (load/backend-load.ts), combined by one rule (runtime/effective-weight.ts:
// their product). Before, both wrote one "reported weight" word and the last
// writer won: a router saw either the agent's percentage or ORCA's weight,
// never both. Real loopback backends that speak both protocols on one port:
// an agent connection sends `agent\n` first, an ORCA poll sends a GET.
import type net from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/log.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { reportedWeight } from '../../src/runtime/effective-weight.js';
import { listenLoopback } from '../helpers/loopback.js';
import { manualClock, pickShares } from '../helpers/runtime.js';
import { until } from '../helpers/until.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const silentLog = createLogger({ level: 'silent' });

/** A backend answering an agent line (`agent`) and an ORCA load report (`orca`) on one port; `agentAnswers` counts the agent's connections. */
async function bothProtocols(agent: string, orca: string): Promise<{ port: number; agentAnswers: () => number }> {
  let answers = 0;
  const port = await listenLoopback(cleanups, (s: net.Socket) => {
    s.once('data', (first: Buffer) => {
      if (first.toString('latin1').startsWith('GET ')) {
        s.end(`HTTP/1.1 200 OK\r\nendpoint-load-metrics: ${orca}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n`);
      } else {
        answers++;
        s.end(`${agent}\n`);
      }
    });
  });
  return { port, agentAnswers: () => answers };
}

describe('the reported weights of the agent and ORCA', () => {
  it('the rule: the product of the two; one alone is itself; neither is no report', () => {
    const table: [agent: number | undefined, orca: number | undefined, combined: number | undefined][] = [
      [undefined, undefined, undefined],
      [0.5, undefined, 0.5],
      [undefined, 4 / 3, 4 / 3],
      [0.5, 4 / 3, 2 / 3],
      [0, 2, 0],
      [2, 0, 0],
      [1, 1, 1],
    ];
    for (const [agent, orca, combined] of table) expect(reportedWeight(agent, orca), `${agent} × ${orca}`).toBe(combined);
  });

  it('neither overwrites the other: both words stand through each other’s rounds, and the picks follow their product', async () => {
    // ORCA (A58: qps / utilization): a 100 / 0.5 = 200, b 100 / 1 = 100; over their mean 150: a 4/3, b 2/3.
    // The agent: a at 50 %, b at 100 %. Combined: a 2/3, b 2/3 — even shares. Either writer alone would give
    // a 1/3 (the agent's) or 2/3 (ORCA's) of the picks.
    const a = await bothProtocols('up 50%', 'TEXT cpu_utilization=0.5, rps_fractional=100');
    const b = await bothProtocols('up 100%', 'TEXT cpu_utilization=1, rps_fractional=100');
    const clock = manualClock(1000);
    // An injected clock: ORCA polls only on pollLoadReports(); the agent checks on its own timers.
    const balancer = new Balancer({
      capacity: 8,
      clock: clock.now,
      logger: silentLog,
      health: { agent: { agentSend: 'agent\n', intervalMs: 20, jitterPercent: 0, timeoutMs: 30_000 }, orca: { blackoutMs: 0 } },
    });
    cleanups.push(() => balancer.close());
    balancer.update([
      { id: 'a', address: `127.0.0.1:${a.port}` },
      { id: 'b', address: `127.0.0.1:${b.port}` },
    ]);
    const slot = (id: string): number => balancer.slotEntries().find((e) => e.id === id)!.slot;
    const r = balancer.ownerTable.reported;
    await until(() => r.agentWeight(slot('a')) === 0.5 && r.agentWeight(slot('b')) === 1, 'the agents answered');
    await balancer.pollLoadReports();
    expect(r.orcaWeight(slot('a'))).toBeCloseTo(4 / 3, 5);
    expect(r.orcaWeight(slot('b'))).toBeCloseTo(2 / 3, 5);
    // Two more agent rounds after ORCA's write: the agent's words and ORCA's stand side by side.
    const seen = a.agentAnswers();
    await until(() => a.agentAnswers() >= seen + 2, 'two more agent rounds on a');
    expect(r.agentWeight(slot('a'))).toBe(0.5);
    expect(r.orcaWeight(slot('a'))).toBeCloseTo(4 / 3, 5);
    // And ORCA's next round leaves the agent's word alone.
    clock.advance(1000);
    await balancer.pollLoadReports();
    expect(r.agentWeight(slot('a'))).toBe(0.5);
    expect(balancer.table.reportedLoad(slot('a'))).toMatchObject({ agent: 0.5, drain: false, maint: false });
    expect(balancer.table.reportedLoad(slot('a')).multiplier).toBeCloseTo(2 / 3, 5);
    // The picks: 20,000 weighted draws at p = 1/2 (sd 0.0035; band ±0.02, far from 1/3 and 2/3).
    const router = balancer.router({ policy: 'weighted', seed: 7 });
    cleanups.push(() => router.close());
    expect(Math.abs(pickShares(router, 20_000).get('a')! - 0.5)).toBeLessThan(0.02);
  });
});
