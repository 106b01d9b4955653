/**
 * Discovery without a DNS server: the scheme registry's refusals, the SRV
 * weight rule, the pairing of a host's two families, the polling loop's
 * last-good rule over a scripted resolver on injected timers, and what
 * metrics and `poise top` show of a source's status. The same sources
 * against a real DNS server: test/integration/discovery-dns.test.ts.
 */
import { Registry } from 'prom-client';
import { describe, expect, it, onTestFinished } from 'vitest';
import { discoverFlag } from '../../src/cli/discover-flags.js';
import { discoveryLines } from '../../src/cli/top.js';
import { UsageError } from '../../src/cli/usage.js';
import { DnsMembership, hostBackends, type DnsResolver } from '../../src/discovery/dns.js';
import { discoverySource } from '../../src/discovery/schemes.js';
import { SrvMembership, srvWeight } from '../../src/discovery/srv.js';
import { srvAnswerTtl } from '../../src/discovery/srv-ttl.js';
import type { MembershipSnapshot } from '../../src/core/spec.js';
import { createLogger } from '../../src/log.js';
import { collectMetrics } from '../../src/metrics/collect.js';
import { parseMetricsText } from '../../src/metrics/text-format.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { bindMembership } from '../../src/membership/source.js';
import { ManualTimers } from '../helpers/manual-timers.js';
import { thrown } from '../helpers/thrown.js';

const silent = createLogger({ level: 'silent' });

/** A resolver whose answers the test sets: records, or a `node:dns` error code. */
class ScriptedResolver implements DnsResolver {
  a: { address: string; ttl: number }[] | string = [];
  aaaa: { address: string; ttl: number }[] | string = 'ENODATA';
  srv: { name: string; port: number; priority: number; weight: number }[] | string = 'ENODATA';
  queries = 0;
  private answer<T>(v: T | string): Promise<T> {
    this.queries++;
    return typeof v === 'string' ? Promise.reject(Object.assign(new Error(v), { code: v })) : Promise.resolve(v);
  }
  resolve4() {
    return this.answer(this.a);
  }
  resolve6() {
    return this.answer(this.aaaa);
  }
  resolveSrv() {
    return this.answer(this.srv);
  }
  cancel() {}
}

describe('discoverySource: the scheme registry', () => {
  it.each([
    ['api.internal:8080', 'discover', 'discover: must be dns:..., srv:..., k8s:...'],
    ['dns:api.internal', 'discover.target', 'discover: target: must be "name:port"'],
    ['dns:10.0.0.1:80', 'discover.target', 'discover: target: must be "name:port"'],
    ['dns:api.internal:0', 'discover.target', 'discover: target: must be "name:port"'],
    ['srv:bad name', 'discover.service', 'discover: service: must be a DNS name'],
    ['dns:api.internal:80?server=x', 'discover.options.servers[0]', 'discover: options.servers[0]: must be an IP address or "ip:port"'],
    ['dns:api.internal:80?port=1', 'discover ?port', 'discover ?port: unknown parameter (accepted: server)'],
    ['k8s:default/api/x', 'discover.target', 'discover: target: must be "namespace/service[:port-name]"'],
    ['k8s:default/Api', 'discover.target', 'discover: target: the service "Api" is not a DNS-1123 label'],
  ])('%s is refused naming %s', (spec, field, message) => {
    const err = thrown(() => discoverySource(spec));
    expect(err.code).toBe('InvalidConfig');
    expect(err.field).toBe(field);
    expect(err.message.startsWith(message)).toBe(true);
  });

  it('dns: and srv: build their sources, the query string setting the servers', () => {
    const dns = discoverySource('dns:api.internal:8080?server=127.0.0.1:5353&server=[::1]:53');
    expect(dns).toBeInstanceOf(DnsMembership);
    expect(dns.description).toBe('dns:api.internal:8080');
    expect(discoverySource('srv:_pg._tcp.db.internal')).toBeInstanceOf(SrvMembership);
  });

  it('the CLI flags: a bad --discover or --dns-server is a usage error naming the flag', () => {
    const usage = (values: Parameters<typeof discoverFlag>[0]): UsageError => {
      try {
        discoverFlag(values, silent);
      } catch (err) {
        if (err instanceof UsageError) return err;
        throw err;
      }
      throw new Error('no usage error');
    };
    expect(usage({ discover: 'dns:nope' })).toMatchObject({ flag: '--discover' });
    expect(usage({ discover: 'dns:a.b:1', 'dns-server': ['1.2.3'] })).toMatchObject({
      flag: '--dns-server',
      message: '--dns-server: must be an IP address or "ip:port" ("[::1]:53" for IPv6), got "1.2.3"',
    });
    expect(usage({ 'dns-server': ['127.0.0.1'] })).toMatchObject({ flag: '--dns-server' });
    expect(discoverFlag({}, silent)).toBeUndefined();
  });
});

describe('the mapping of records to backends', () => {
  it('SRV weight: w > 0 is 100 w, 0 is 1 beside weighted records (RFC 2782: a very small chance), 1 when all of its priority are 0', () => {
    expect([3, 1, 0, 65535].map((w) => srvWeight(w, false))).toEqual([300, 100, 1, 6_553_500]);
    expect(srvWeight(0, true)).toBe(1);
  });

  it("a host's two families are paired in sorted order: max(#A, #AAAA) backends, the IPv6 address first", () => {
    const r = (...a: string[]) => a.map((address) => ({ address, ttl: 5 }));
    expect(hostBackends({ v4: r('10.0.0.2', '10.0.0.1'), v6: r('fd00::1') }, 80, { hostname: 'h' }, (a) => a)).toEqual([
      { id: '[fd00::1]:80', address: '[fd00::1]:80', hostname: 'h', fallbackIp: '10.0.0.1' },
      { id: '10.0.0.2:80', address: '10.0.0.2:80', hostname: 'h' },
    ]);
  });
});

describe('the SRV TTL read from the wire', () => {
  /** An answer to query `id`: header, one question `_x._tcp.t`, then SRV records with these TTLs (the name a pointer to the question). */
  const answer = (id: number, ttls: number[], flags = 0x8180): Buffer => {
    const q = Buffer.from([2, 95, 120, 4, 95, 116, 99, 112, 1, 116, 0, 0, 33, 0, 1]);
    const rrs = ttls.map((ttl) => {
      const rr = Buffer.alloc(12 + 8);
      rr.writeUInt16BE(0xc00c, 0);
      rr.writeUInt16BE(33, 2);
      rr.writeUInt16BE(1, 4);
      rr.writeUInt32BE(ttl, 6);
      rr.writeUInt16BE(8, 10);
      rr.writeUInt16BE(0, 12); // priority, weight, port, target "."
      return rr.subarray(0, 12 + 7);
    });
    const head = Buffer.alloc(12);
    head.writeUInt16BE(id, 0);
    head.writeUInt16BE(flags, 2);
    head.writeUInt16BE(1, 4);
    head.writeUInt16BE(ttls.length, 6);
    return Buffer.concat([head, q, ...rrs.map((r) => Buffer.concat([r, Buffer.from([0])]))]);
  };
  it('answers the smallest SRV TTL, and nothing for another id, a truncated answer, an error code or a short message', () => {
    expect(srvAnswerTtl(answer(7, [30, 12, 40]), 7)).toBe(12);
    expect(srvAnswerTtl(answer(7, [30]), 8)).toBeUndefined();
    expect(srvAnswerTtl(answer(7, [30], 0x8380), 7)).toBeUndefined(); // TC
    expect(srvAnswerTtl(answer(7, [30], 0x8182), 7)).toBeUndefined(); // SERVFAIL
    expect(srvAnswerTtl(answer(7, [30]).subarray(0, 30), 7)).toBeUndefined();
    expect(srvAnswerTtl(answer(7, []), 7)).toBeUndefined();
  });
});

describe('the polling loop over a scripted resolver', () => {
  it('a failed or empty answer keeps the last good: nothing is delivered, the state is stale, the next query comes after the backoff', async () => {
    const resolver = new ScriptedResolver();
    resolver.a = [{ address: '10.0.0.1', ttl: 30 }];
    const timers = new ManualTimers();
    const seen: MembershipSnapshot[] = [];
    const source = new DnsMembership('api.internal:80', {
      resolver,
      timers,
      logger: silent,
      wallClock: () => 42_000,
      retry: { baseMs: 1_000, maxMs: 1_000 },
    });
    onTestFinished(() => source.close());
    await source.start((s) => void seen.push(s));
    expect(source.status).toEqual({
      source: 'dns:api.internal:80',
      lastSuccessMs: 42_000,
      errors: { notfound: 0, empty: 0, servfail: 0, timeout: 0, malformed: 0, unreachable: 0, other: 0 },
      records: 1,
      state: 'ok',
    });
    for (const [code, kind] of [
      ['ESERVFAIL', 'servfail'],
      ['ENODATA', 'empty'],
      ['ENOTFOUND', 'notfound'],
      ['ETIMEOUT', 'timeout'],
      ['EBADRESP', 'malformed'],
      ['ECONNREFUSED', 'unreachable'],
    ] as const) {
      resolver.a = code;
      const before = resolver.queries;
      await timers.advance(29_999);
      expect(resolver.queries).toBe(before);
      await timers.advance(1);
      expect(source.status.errors[kind]).toBe(1);
      expect(source.status.state).toBe('stale');
      expect(source.problem?.code).toBe('Unavailable');
      // The retry comes after the backoff (1 s here), not the TTL: answer it well again.
      resolver.a = [{ address: '10.0.0.1', ttl: 30 }];
      await timers.advance(1_000);
      expect(source.status.state).toBe('ok');
      expect(source.problem).toBeUndefined();
    }
    // The same answer every time: one delivery, version 1.
    expect(seen.map((s) => s.version)).toEqual([1]);
    expect(source.version).toBe(1);
  });

  it('an SRV answer whose targets all fail, or with no usable target, keeps the last good; the interval is min(SRV TTL, target TTLs)', async () => {
    const resolver = new ScriptedResolver();
    resolver.srv = [
      { name: 'a.internal', port: 5432, priority: 0, weight: 1 },
      { name: 'b.internal', port: 5432, priority: 1, weight: 1 },
    ];
    resolver.a = [{ address: '10.0.0.1', ttl: 60 }];
    const timers = new ManualTimers();
    const seen: MembershipSnapshot[] = [];
    const source = new SrvMembership('_pg._tcp.db.internal', {
      resolver,
      timers,
      logger: silent,
      srvTtlSeconds: 20,
      retry: { baseMs: 5_000, maxMs: 5_000 },
    });
    onTestFinished(() => source.close());
    await source.start((s) => void seen.push(s));
    expect(seen[0]!.backends.map((b) => [b.id, b.priority])).toEqual([
      ['a.internal:5432', 0],
      ['b.internal:5432', 1],
    ]);
    resolver.a = 'ESERVFAIL';
    await timers.advance(19_999); // min(SRV 20 s, targets 60 s)
    expect(source.status.errors.servfail).toBe(0);
    await timers.advance(1);
    expect(source.status.errors.servfail).toBe(1);
    expect(source.status).toMatchObject({ state: 'stale', records: 2 });
    expect(seen).toHaveLength(1);
    resolver.srv = [{ name: '.', port: 1, priority: 0, weight: 0 }];
    await timers.advance(5_000);
    expect(source.status.errors.empty).toBe(1);
    expect(seen).toHaveLength(1);
  });
});

describe('close() against a query in flight', () => {
  it('an answer that arrives after close() is never delivered and schedules nothing (300 rounds, the answer before and after close)', async () => {
    for (let round = 0; round < 300; round++) {
      const resolver = new ScriptedResolver();
      let release: () => void = () => {};
      const gate = new Promise<void>((resolve) => {
        release = resolve;
      });
      let pending = 0;
      resolver.resolve4 = () => {
        pending++;
        return gate.then(() => [{ address: '10.0.0.1', ttl: 30 }]);
      };
      const timers = new ManualTimers();
      const seen: MembershipSnapshot[] = [];
      const source = new DnsMembership('api.internal:80', { resolver, timers, logger: silent, initial: 'wait' });
      const started = source.start((s) => void seen.push(s));
      // Even rounds: the answer is delivered before close() (its re-query timer then cleared); odd rounds: it comes after.
      const before = round % 2 === 0;
      if (before) {
        release();
        await started;
      }
      await source.close();
      release();
      await started;
      expect(pending).toBe(1);
      expect(seen).toHaveLength(before ? 1 : 0);
      expect(timers.pending).toBe(0);
      await timers.advance(60_000);
      expect(pending).toBe(1);
    }
  });
});

describe('metrics and poise top', () => {
  it('collectMetrics shows a discovery source: last success, errors by kind, records, state; top prints one line of it', async () => {
    const resolver = new ScriptedResolver();
    resolver.a = [{ address: '10.0.0.1', ttl: 30 }];
    const timers = new ManualTimers();
    const balancer = new Balancer({ capacity: 4, logger: silent });
    onTestFinished(() => balancer.close());
    const source = new DnsMembership('api.internal:80', {
      resolver,
      timers,
      logger: silent,
      wallClock: () => 1_700_000_000_000,
      retry: { baseMs: 1_000, maxMs: 1_000 },
    });
    const binding = await bindMembership(source, balancer, { logger: silent });
    onTestFinished(() => binding.close());
    resolver.a = 'ESERVFAIL';
    await timers.advance(30_000);
    const registry = new Registry();
    collectMetrics(balancer, { registry, cluster: 'api', source });
    const families = parseMetricsText(await registry.metrics());
    const L = { cluster: 'api', source: 'dns:api.internal:80' };
    expect(families.get('poise_discovery_last_success_timestamp_seconds')?.samples).toEqual([
      { name: 'poise_discovery_last_success_timestamp_seconds', labels: L, value: 1_700_000_000 },
    ]);
    expect(families.get('poise_discovery_records')?.samples.map((x) => x.value)).toEqual([1]);
    const errors = families.get('poise_discovery_errors_total')!.samples;
    expect(errors.map((x) => [x.labels['kind'], x.value])).toEqual([
      ['notfound', 0],
      ['empty', 0],
      ['servfail', 1],
      ['timeout', 0],
      ['malformed', 0],
      ['unreachable', 0],
      ['other', 0],
    ]);
    expect(
      families
        .get('poise_discovery_state')!
        .samples.filter((x) => x.value === 1)
        .map((x) => x.labels['state']),
    ).toEqual(['stale']);
    expect(families.get('poise_membership_info')!.samples[0]!.labels['source']).toBe('dns');
    expect(discoveryLines(families, 1_700_000_012_000)).toEqual([
      'discovery dns:api.internal:80: stale  records 1  last good 12 s ago  errors servfail 1',
    ]);
  });
});
