/**
 * poise-lb/drivers without servers: bad input is a PoiseError naming its
 * field, and poiseScaleReads' bookkeeping on fake ioredis nodes and
 * commands — each routed read holds one lease until its reply; a reply
 * error ends it as an answer, a connection error as a failure; a command
 * routed again ends its earlier lease; a MOVED read goes to nodes[0].
 */
import { describe, expect, it } from 'vitest';
import { poiseScaleReads, type RedisCommandLike, type RedisNodeLike } from '../../src/outbound/ioredis-scale-reads.js';
import { createPoolCluster } from '../../src/outbound/mysql-pool-cluster.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { thrown } from '../helpers/thrown.js';

const node = (port: number): RedisNodeLike => ({ options: { host: '127.0.0.1', port } });

class FakeCommand implements RedisCommandLike {
  readonly settled: unknown[] = [];
  resolve = (v: unknown): void => {
    this.settled.push(v);
  };
  reject = (e: Error): void => {
    this.settled.push(e);
  };
}

function replyError(message: string): Error {
  const e = new Error(message);
  Object.defineProperty(e, 'name', { value: 'ReplyError' });
  return e;
}

function shard() {
  const balancer = new Balancer({ capacity: 8 });
  const router = balancer.router({ policy: 'p2c:latency', seed: 7 });
  const [m, r1, r2, m2] = [node(7000), node(7001), node(7002), node(7003)];
  const fn = poiseScaleReads(router);
  const slots: string[][] = [['127.0.0.1:7000', '127.0.0.1:7001', '127.0.0.1:7002'], ['127.0.0.1:7003']];
  const listeners: (() => void)[] = [];
  fn.follow({ slots, on: (_e, l) => listeners.push(l), off: () => {} }, balancer);
  router.refresh();
  return { balancer, router, fn, nodes: [m!, r1!, r2!], m2: m2! };
}

describe('poise-lb/drivers: validation', () => {
  it('poiseScaleReads / poisePreferredSlaves / createPoolCluster name the field they refuse', () => {
    expect(thrown(() => poiseScaleReads(null as never)).field).toBe('router');
    const balancer = new Balancer({ capacity: 2 });
    try {
      expect(thrown(() => poiseScaleReads(balancer.router(), { from: 'slaves' as never })).field).toBe('options.from');
    } finally {
      balancer.close();
    }
    expect(thrown(() => createPoolCluster({} as never)).field).toBe('options.createPool');
    expect(thrown(() => createPoolCluster({ createPool: () => ({}), defaultSelector: 'FASTEST' as never })).field).toBe(
      'options.defaultSelector',
    );
  });
});

describe('poiseScaleReads on fake nodes', () => {
  it('follow() makes a tier per shard; reads go to replicas only, one lease each until the reply', () => {
    const s = shard();
    try {
      // Shards in the masters' sorted order: 7000's replicas tier 0, 7000 alone in 1; 7003 (no replica) alone in 3.
      expect(s.router.member('127.0.0.1:7001')!.priority).toBe(0);
      expect(s.router.member('127.0.0.1:7002')!.priority).toBe(0);
      expect(s.router.member('127.0.0.1:7000')!.priority).toBe(1);
      expect(s.router.member('127.0.0.1:7003')!.priority).toBe(3);
      const cmds = Array.from({ length: 40 }, () => new FakeCommand());
      const chosen = cmds.map((c) => s.fn(s.nodes, c));
      for (const n of chosen) expect([s.nodes[1], s.nodes[2]]).toContain(n);
      expect(s.router.openLeases).toBe(40);
      for (const [i, c] of cmds.entries()) c.resolve(`v${i}`);
      expect(s.router.openLeases).toBe(0);
      // Each caller got its own reply, once.
      expect(cmds.map((c) => c.settled)).toEqual(cmds.map((_, i) => [`v${i}`]));
      // A shard with no replica: the master, no lease.
      expect(s.fn([s.m2], new FakeCommand())).toBe(s.m2);
      expect(s.router.openLeases).toBe(0);
    } finally {
      s.balancer.close();
    }
  });

  it('a reply error ends the lease as an answer, a connection error as a failure (passive health counts it)', () => {
    const s = shard();
    try {
      const c = new FakeCommand();
      const n = s.fn(s.nodes, c);
      c.reject(replyError('WRONGTYPE Operation against a key holding the wrong kind of value'));
      expect(s.router.openLeases).toBe(0);
      const id = `127.0.0.1:${n.options.port}`;
      const slot = s.balancer.slotEntries().find((e) => e.id === id)!.slot;
      expect(s.balancer.ownerTable.health.failures(slot)).toBe(0);
      const d = new FakeCommand();
      const n2 = s.fn(s.nodes, d);
      d.reject(new Error('Connection is closed.'));
      const slot2 = s.balancer.slotEntries().find((e) => e.id === `127.0.0.1:${n2.options.port}`)!.slot;
      expect(s.balancer.ownerTable.health.failures(slot2)).toBe(1);
      expect(d.settled.length).toBe(1);
    } finally {
      s.balancer.close();
    }
  });

  it('MOVED: the re-send goes to nodes[0] (the new owner ioredis wrote there), leased there; a command routed twice holds one lease', () => {
    const s = shard();
    try {
      const c = new FakeCommand();
      s.fn(s.nodes, c);
      c.reject(replyError('MOVED 1234 127.0.0.1:7000'));
      // The command's own reject (ioredis's redirect handler) saw the MOVED once.
      expect(c.settled.length).toBe(1);
      expect(s.router.openLeases).toBe(0);
      expect(s.fn(s.nodes, c)).toBe(s.nodes[0]);
      expect(s.router.openLeases).toBe(1);
      // Routed again before any reply (a retried pipeline): still one lease.
      s.fn(s.nodes, c);
      expect(s.router.openLeases).toBe(1);
      c.resolve('ok');
      expect(s.router.openLeases).toBe(0);
      expect(c.settled.slice(1)).toEqual(['ok']);
    } finally {
      s.balancer.close();
    }
  });

  it('MOVED sends one re-send to nodes[0]: a later routing of the same command goes to a replica by the policy again', () => {
    const s = shard();
    try {
      const c = new FakeCommand();
      s.fn(s.nodes, c);
      c.reject(replyError('MOVED 1234 127.0.0.1:7000'));
      expect(s.fn(s.nodes, c)).toBe(s.nodes[0]);
      c.resolve('ok');
      expect(s.router.openLeases).toBe(0);
      // Routed again (a later retry of the same command object): a replica, leased, not the redirect's node.
      for (let i = 0; i < 5; i++) {
        const to = s.fn(s.nodes, c);
        expect(s.nodes.slice(1)).toContain(to);
        expect(s.router.openLeases).toBe(1);
      }
    } finally {
      s.balancer.close();
    }
  });
});
