// The agent check beside the active check (health.agent), as HAProxy runs
// `check` + `agent-check`: the active check decides up / down, the agent
// sets the weight, drain / maint / ready, and may mark the backend down
// until it says up; an agent that cannot be reached changes nothing. Real
// TCP servers on loopback: each backend answers its agent line on every
// connection (the TCP check just connects), or its agent listens apart.
import { createServer, type AddressInfo, type Server } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ReportFlag } from '../../src/load/backend-load.js';
import { HealthFlag } from '../../src/load/passive-health.js';
import { createLogger } from '../../src/log.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { pickShares } from '../helpers/runtime.js';
import { thrown } from '../helpers/thrown.js';
import { until } from '../helpers/until.js';

const open: { close(): void }[] = [];
afterEach(() => {
  for (const o of open.splice(0)) o.close();
});

function listen(s: Server): Promise<Server> {
  return new Promise((resolve, reject) => {
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => resolve(s));
  });
}
const portOf = (s: Server): number => (s.address() as AddressInfo).port;

/** A TCP server that answers `reply()` and closes, on every connection. */
async function agentServer(reply: () => string): Promise<Server> {
  // A check that connects and closes at once may reset the socket before the reply is written: not an error here.
  const s = await listen(createServer((sock) => sock.on('error', () => {}).end(`${reply()}\n`)));
  open.push(s);
  return s;
}

const fast = { intervalMs: 20, jitterPercent: 0 };

describe('health.agent beside health.check', () => {
  it('four backends, tcp check up: the agent halves one weight, drains one, takes one down until it says up', async () => {
    const replies = new Map([
      ['a', 'up 100%'],
      ['b', 'up 100%'],
      ['c', 'up 50%'],
      ['d', 'up 100%'],
    ]);
    const servers = await Promise.all([...replies.keys()].map(async (id) => ({ id, s: await agentServer(() => replies.get(id)!) })));
    const b = new Balancer({
      capacity: 8,
      logger: createLogger({ level: 'silent' }),
      health: { check: { kind: 'tcp', ...fast, rise: 1, fall: 1 }, agent: fast },
    });
    open.push(b);
    b.update(servers.map(({ id, s }) => ({ id, address: `127.0.0.1:${portOf(s)}` })));
    const slotOf = (id: string) => b.slotEntries().find((e) => e.id === id)!.slot;
    const t = b.ownerTable;
    await until(() => (t.reported.flags(slotOf('c')) & ReportFlag.Weight) !== 0, 'the agents answered');
    await until(() => b.healthStats().backends.every((x) => x.check === 'up'), 'every tcp check passed');
    const router = b.router({ policy: 'weighted', seed: 11 });
    // Weights 1, 1, 0.5, 1: c's share 1/7 (20,000 picks: sd 0.0025; band ±0.012).
    expect(Math.abs(pickShares(router, 20_000).get('c')! - 1 / 7)).toBeLessThan(0.012);

    replies.set('d', 'drain');
    await until(() => (t.reported.flags(slotOf('d')) & ReportFlag.Drain) !== 0, 'd drained');
    expect(pickShares(router, 5000).get('d')).toBeUndefined();
    // The active check still says up: drain is the agent's, not a failure.
    expect(b.healthStats().backends.find((x) => x.id === 'd')!.check).toBe('up');
    replies.set('d', 'ready up');
    await until(() => (t.reported.flags(slotOf('d')) & ReportFlag.Drain) === 0, 'd ready');

    // The agent says down: out of every new lease while the tcp check passes, until it says up.
    replies.set('a', 'down # disk full');
    await until(() => (t.health.health(slotOf('a')) & HealthFlag.AgentDown) !== 0, 'a down by its agent');
    expect(b.healthStats().backends.find((x) => x.id === 'a')!.check).toBe('up');
    expect(pickShares(router, 5000).get('a')).toBeUndefined();
    expect(thrown(() => router.acquire({ exclude: ['b', 'c', 'd'] })).code).toBe('NoEligibleCandidates');
    // A reply without a state word leaves it down (HAProxy: down until the agent says up).
    replies.set('a', '100%');
    const checksBefore = b.healthStats();
    await until(() => b.healthStats().counters.checks >= checksBefore.counters.checks + 8, 'more tcp checks ran');
    expect(t.health.health(slotOf('a')) & HealthFlag.AgentDown).toBe(HealthFlag.AgentDown);
    replies.set('a', 'up');
    await until(() => (t.health.health(slotOf('a')) & HealthFlag.AgentDown) === 0, 'a up again');
    expect(pickShares(router, 5000).get('a')).toBeGreaterThan(0);
    router.close();
  });

  it('the active check decides down: an unreachable agent changes nothing; a backend whose port refuses goes down though its agent last said up', async () => {
    const agent = await agentServer(() => 'up 40%');
    const backend = await listen(createServer((sock) => sock.on('error', () => {}).end()));
    const port = portOf(backend);
    const b = new Balancer({
      capacity: 4,
      logger: createLogger({ level: 'silent' }),
      health: { check: { kind: 'tcp', ...fast, rise: 1, fall: 1 }, agent: { ...fast, agentPort: portOf(agent) } },
    });
    open.push(b);
    b.update([{ id: 'x', address: `127.0.0.1:${port}` }]);
    const t = b.ownerTable;
    await until(() => t.reported.agentMultiplier(0) === 0.4, 'the agent weight');
    await until(() => b.healthStats().backends[0]?.check === 'up', 'x up');
    // The agent goes away: its weight stays, the backend stays up and eligible.
    await new Promise<void>((r) => agent.close(() => r()));
    const before = b.healthStats().counters.checks;
    await until(() => b.healthStats().counters.checks >= before + 10, 'ten more tcp checks while the agent is away');
    expect(t.reported.agentMultiplier(0)).toBe(0.4);
    expect(t.health.health(0) & (HealthFlag.AgentDown | HealthFlag.Unhealthy)).toBe(0);
    // The backend's port closes: the tcp check takes it down (the agent's last word was up).
    await new Promise<void>((r) => backend.close(() => r()));
    await until(() => b.healthStats().backends[0]?.check === 'down', 'x down by its check');
    expect(t.health.health(0) & HealthFlag.Unhealthy).toBe(HealthFlag.Unhealthy);
    expect(t.health.health(0) & HealthFlag.AgentDown).toBe(0);
  });

  it('refuses an agent beside a check of kind agent, unknown agent fields, and a bad agent port, naming the field', () => {
    const opts = (health: unknown) => () => new Balancer({ health: health as never });
    expect(thrown(opts({ check: { kind: 'agent' }, agent: {} })).message).toBe(
      'options.health.agent: cannot run beside a check of kind "agent" (one agent per backend), got a object',
    );
    expect(thrown(opts({ agent: { rise: 2 } })).message).toMatch(/^options\.health\.agent\.rise: /);
    expect(thrown(opts({ agent: { agentPort: 0 } })).message).toBe(
      'options.health.agent.agentPort: must be an integer in [1, 65535], got 0',
    );
  });
});
