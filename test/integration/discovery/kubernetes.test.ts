/**
 * The Kubernetes source against the test API server (test/helpers/kube-api.ts,
 * a loopback server in this process): list + watch, the routers following
 * each event, and every failure mode of the JS informer that the source is
 * built against. Time (the back-off, the stall watchdog) is a ManualTimers
 * clock; the tests wait on events and counts, never on wall time.
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { type KubernetesMembership, kubernetesSource, type KubernetesSourceOptions } from '../../../src/discovery/kubernetes.js';
import { bindMembership } from '../../../src/membership/source.js';
import { Balancer } from '../../../src/runtime/balancer.js';
import type { Lease } from '../../../src/runtime/lease.js';
import {
  startKubeApi,
  writeKubeconfig,
  writeServiceAccount,
  type KubeApiOptions,
  type TestEndpoint,
  type TestKubeApi,
} from '../../helpers/kube-api.js';
import { openLeases } from '../../helpers/leases.js';
import { pickShares } from '../../helpers/runtime.js';
import { captureLog, type CapturedLog } from '../../helpers/log-capture.js';
import { ManualTimers } from '../../helpers/manual-timers.js';
import { rejection } from '../../helpers/thrown.js';
import { until } from '../../helpers/until.js';

const cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const pods = (n: number, extra: Partial<TestEndpoint> = {}, from = 1): TestEndpoint[] =>
  Array.from({ length: n }, (_, i) => ({ ip: `10.0.0.${from + i}`, ready: true, zone: i % 2 === 0 ? 'zone-a' : 'zone-b', ...extra }));

interface Rig {
  api: TestKubeApi;
  timers: ManualTimers;
  source: KubernetesMembership;
  balancer: Balancer;
  log: CapturedLog;
  /** Ids of the membership in force with their status. */
  members(): string[];
}

async function rig(
  opts: { api?: KubeApiOptions; source?: KubernetesSourceOptions; slices?: TestEndpoint[][]; target?: string; start?: boolean } = {},
): Promise<Rig> {
  const api = await startKubeApi(opts.api);
  cleanups.push(() => api.stop());
  (opts.slices ?? [pods(2)]).forEach((eps, i) => {
    api.setSlice('shop', `api-${i}`, 'api', eps);
  });
  const timers = new ManualTimers();
  const log = captureLog();
  const source = kubernetesSource(opts.target ?? 'shop/api:http', {
    kubeconfig: writeKubeconfig(api),
    timers,
    seed: 7,
    backoff: { baseMs: 100, maxMs: 1000 },
    stallTimeoutMs: 60_000,
    logger: log.logger,
    ...opts.source,
  });
  const balancer = new Balancer({ capacity: 64 });
  cleanups.push(() => balancer.close());
  cleanups.push(() => source.close());
  if (opts.start !== false) await bindMembership(source, balancer, { logger: log.logger });
  const members = (): string[] =>
    live(balancer)
      .map((e) => `${e.id}:${e.spec.status}`)
      .sort();
  return { api, timers, source, balancer, log, members };
}

/** A source of `target` on `api` through a kubeconfig (`kubeconfig` options), closed when the test ends. */
function sourceOn(
  api: TestKubeApi,
  target: string,
  kubeconfig: Parameters<typeof writeKubeconfig>[1] = {},
  opts: KubernetesSourceOptions = {},
): KubernetesMembership {
  const source = kubernetesSource(target, {
    kubeconfig: writeKubeconfig(api, kubeconfig),
    timers: new ManualTimers(),
    logger: captureLog().logger,
    ...opts,
  });
  cleanups.push(() => source.close());
  return source;
}

/** The Balancer's members in force (not removed), by id. */
function live(balancer: Balancer): ReturnType<Balancer['slotEntries']> {
  return balancer
    .slotEntries()
    .filter((e) => !e.removed)
    .sort((a, b) => (a.id < b.id ? -1 : 1));
}

/** The share of each id in `n` round-robin picks of a fresh router (each lease released at once). */
const picks = (balancer: Balancer, n: number): Map<string, number> => pickShares(balancer.router({ policy: 'round-robin' }), n);

describe('kubernetesSource: list and watch', () => {
  it('lists the slices, then follows each event within that event: scale up, ready/terminating flips, scale down', async () => {
    const r = await rig({ slices: [pods(2)] });
    expect(r.source.version).toBe(1);
    expect(r.members()).toEqual(['10.0.0.1:8080:ready', '10.0.0.2:8080:ready']);
    expect(live(r.balancer).map((e) => e.spec.locality)).toEqual(['zone-a', 'zone-b']);
    await r.api.watching();
    const router = r.balancer.router({ policy: 'round-robin' });
    // Leases held across every change below: none may be lost.
    const held: Lease[] = [router.acquire(), router.acquire()];

    // Scale up: one event, one new version, the new pod routed.
    r.api.setSlice('shop', 'api-0', 'api', pods(3));
    await until(() => r.source.version === 2, 'version 2 after the scale-up event');
    // Zones a and b share the picks (locality routing from the topology): pod 3 joins zone a's half.
    const shares = picks(r.balancer, 3000);
    expect([...shares.keys()].sort()).toEqual(['10.0.0.1:8080', '10.0.0.2:8080', '10.0.0.3:8080']);
    expect(shares.get('10.0.0.2:8080')).toBeGreaterThan(0.5 - 5 * 0.0092); // zone b: binomial(3000, 1/2) / 3000, 5 sd
    expect(shares.get('10.0.0.2:8080')).toBeLessThan(0.5 + 5 * 0.0092);
    held.push(router.acquire(), router.acquire(), router.acquire());

    // Pod 1 starts terminating (still serving): draining; not one pick goes to it.
    r.api.setSlice('shop', 'api-0', 'api', [
      { ip: '10.0.0.1', ready: false, serving: true, terminating: true, zone: 'zone-a' },
      ...pods(2, {}, 2),
    ]);
    await until(() => r.source.version === 3, 'version 3 after the terminating event');
    expect(r.members()).toContain('10.0.0.1:8080:draining');
    expect(picks(r.balancer, 2000).get('10.0.0.1:8080')).toBeUndefined();

    // Pod 2 fails readiness (not terminating): unavailable, no picks; then ready again.
    r.api.setSlice('shop', 'api-0', 'api', [
      { ip: '10.0.0.2', ready: false },
      { ip: '10.0.0.3', ready: true },
    ]);
    await until(() => r.source.version === 4, 'version 4');
    expect(r.members()).toEqual(['10.0.0.2:8080:unavailable', '10.0.0.3:8080:ready']);
    expect([...picks(r.balancer, 500).keys()]).toEqual(['10.0.0.3:8080']);
    r.api.setSlice('shop', 'api-0', 'api', pods(2, {}, 2));
    await until(() => r.source.version === 5, 'version 5');
    expect([...picks(r.balancer, 200).keys()].sort()).toEqual(['10.0.0.2:8080', '10.0.0.3:8080']);

    // Every lease held since before the changes comes back, once.
    for (const l of held) l.release('success');
    expect(openLeases(r.balancer)).toBe(0);
    expect(r.api.counts.lists).toBe(1);
    expect(r.api.counts.watches).toBe(1);
  });

  it('a second slice of the service joins and leaves; a DELETED event removes its endpoints', async () => {
    const r = await rig({ slices: [pods(1)] });
    await r.api.watching();
    r.api.setSlice('shop', 'api-extra', 'api', pods(2, {}, 5));
    await until(() => r.source.version === 2, 'the second slice');
    expect(r.members()).toEqual(['10.0.0.1:8080:ready', '10.0.0.5:8080:ready', '10.0.0.6:8080:ready']);
    r.api.deleteSlice('shop', 'api-extra');
    await until(() => r.source.version === 3, 'the deletion');
    expect(r.members()).toEqual(['10.0.0.1:8080:ready']);
    // Another service's slice is not this source's.
    r.api.setSlice('shop', 'web-0', 'web', pods(1, {}, 9));
    r.api.setSlice('shop', 'api-0', 'api', pods(2));
    await until(() => r.source.version === 4, 'the next change');
    expect(r.members()).toEqual(['10.0.0.1:8080:ready', '10.0.0.2:8080:ready']);
  });

  it('lists in pages (limit + continue) and routes to the port of the given name', async () => {
    const api = await startKubeApi();
    cleanups.push(() => api.stop());
    for (let i = 0; i < 5; i++)
      api.setSlice('shop', `s${i}`, 'api', pods(1, {}, i + 1), [
        { name: 'http', port: 80 },
        { name: 'grpc', port: 9000 },
      ]);
    const source = sourceOn(api, 'shop/api:grpc', {}, { pageSize: 2 });
    const got: string[][] = [];
    await source.start((s) => void got.push(s.backends.map((b) => b.address)));
    expect(api.counts.lists).toBe(3);
    expect(got).toEqual([['10.0.0.1:9000', '10.0.0.2:9000', '10.0.0.3:9000', '10.0.0.4:9000', '10.0.0.5:9000']]);
  });

  it('a BOOKMARK moves the resourceVersion and delivers nothing', async () => {
    const r = await rig();
    await r.api.watching();
    r.api.setSlice('shop', 'web-0', 'web', pods(1)); // moves the cluster's resourceVersion, not this service
    r.api.bookmark();
    await until(() => r.source.resourceVersion === String(r.api.resourceVersion), 'the bookmark');
    expect(r.source.version).toBe(1);
  });
});

describe('kubernetesSource: failure modes', () => {
  // 410 Gone two ways: an ERROR event on the open watch (the API's usual answer), or an HTTP 410 to a watch resumed
  // (after the server's own timeout) from a resourceVersion the history no longer holds. The ended watch carried
  // nothing, so that case backs off once before resuming it.
  it.each([
    { gone: 'event' as const, how: 'an ERROR event with code 410', backoffs: 1 },
    { gone: 'status' as const, how: 'an HTTP 410 to the resumed watch', backoffs: 2 },
  ])('410 Gone as $how: re-lists after a jittered back-off and picks up what changed meanwhile', async ({ gone, backoffs }) => {
    const r = await rig({ api: { gone } });
    await r.api.watching();
    r.api.silence(); // the change below reaches the source only through the re-list
    r.api.setSlice('shop', 'api-0', 'api', pods(3));
    r.api.compact();
    if (gone === 'event') r.api.expireWatches();
    else r.api.endWatches();
    for (let k = 1; k <= backoffs; k++) {
      await until(() => r.source.counts.backoffs === k, `back-off ${k}`);
      expect(r.api.counts.lists).toBe(1);
      await r.timers.advance(1000);
    }
    await until(() => r.source.version === 2, 'the re-list');
    expect(r.api.counts.lists).toBe(2);
    await r.api.watching();
    expect(r.api.counts.watches).toBe(gone === 'event' ? 2 : 3);
    expect(r.members()).toHaveLength(3);
  });

  it('a watch the server ends (its timeout) is resumed from the resourceVersion, without a re-list', async () => {
    const r = await rig();
    await r.api.watching();
    r.api.setSlice('shop', 'api-0', 'api', pods(3));
    await until(() => r.source.version === 2, 'the event');
    r.api.endWatches();
    await r.api.watching();
    r.api.setSlice('shop', 'api-0', 'api', pods(4));
    await until(() => r.source.version === 3, 'the next event on the resumed watch');
    expect(r.api.counts.lists).toBe(1);
    expect(r.api.counts.watches).toBe(2);
    expect(r.api.log[2]).toContain(`resourceVersion=${r.api.resourceVersion - 1}`);
  });

  it('a watch that goes silent (client-node#958, #596: no event, no bookmark) is dropped after stallTimeoutMs and re-listed', async () => {
    const r = await rig();
    await r.api.watching();
    r.api.silence();
    r.api.setSlice('shop', 'api-0', 'api', pods(3));
    await r.timers.advance(59_999);
    expect(r.api.counts.lists).toBe(1); // not before the stated time
    await r.timers.advance(1);
    await until(() => r.source.counts.backoffs === 1 && r.source.status.errors.timeout === 1, 'the watchdog');
    await r.timers.advance(1000);
    await until(() => r.source.version === 2, 'the re-list after the stall');
    expect(r.api.counts.lists).toBe(2);
    expect(r.log.find('no event and no bookmark')).toHaveLength(1);
  });

  it('bookmarks keep a quiet watch alive: no re-list while they come', async () => {
    const r = await rig();
    await r.api.watching();
    for (let i = 0; i < 5; i++) {
      await r.timers.advance(50_000);
      const rv = r.source.resourceVersion;
      r.api.setSlice('shop', `other-${i}`, 'web', pods(1));
      r.api.bookmark();
      await until(() => r.source.resourceVersion !== rv, 'the bookmark');
    }
    expect(r.api.counts.lists).toBe(1);
    expect(r.api.counts.watches).toBe(1);
  });

  it('a connection reset mid-event (client-node#1496) resumes the watch: the cut event arrives whole, once, without a re-list', async () => {
    const r = await rig();
    await r.api.watching();
    for (let round = 0; round < 20; round++) {
      const version = r.source.version;
      r.api.cutNextEvent();
      r.api.setSlice('shop', 'api-0', 'api', pods(2 + (round % 3) + 1));
      await until(() => r.source.counts.backoffs === round + 1 && r.source.status.errors.unreachable === round + 1, 'the reset seen');
      expect(r.source.version).toBe(version); // the half event was not applied
      await r.timers.advance(1000);
      await until(() => r.source.version === version + 1, 'the event again, whole');
      expect(r.members()).toHaveLength(2 + (round % 3) + 1);
    }
    expect(r.api.counts.lists).toBe(1);
    expect(r.api.counts.watches).toBe(21);
  });

  it('an API server that fails every request after a restart (client-node#1933) is asked on a growing, jittered back-off, and the membership stays', async () => {
    const r = await rig();
    await r.api.watching();
    r.api.failNext(1_000_000, 503);
    r.api.endWatches();
    const before = r.api.counts.requests;
    const delays: number[] = [];
    for (let k = 1; k <= 30; k++) {
      await until(() => r.source.counts.backoffs === k, `failure ${k}`);
      delays.push(r.source.counts.lastBackoffMs);
      await r.timers.advance(r.source.counts.lastBackoffMs);
    }
    await until(() => r.api.counts.requests - before === 30, 'the 30th request');
    // Each wait is uniform in [100, min(1000, 100 · 2^(n+1))) before the n-th retry (0-based): never a tight loop,
    // and the jitter spreads a fleet's retries instead of re-listing in lockstep.
    delays.forEach((d, n) => {
      expect(d).toBeGreaterThanOrEqual(100);
      expect(d).toBeLessThan(Math.min(1000, 100 * 2 ** (n + 1)));
    });
    // At the cap the draws are uniform in [100, 1000): mean 550, sd 260; over the last 20, 5 sd of the mean's spread is ±290.
    const tail = delays.slice(10);
    const mean = tail.reduce((a, b) => a + b, 0) / tail.length;
    expect(mean).toBeGreaterThan(550 - 290);
    expect(new Set(tail.map((d) => Math.round(d))).size).toBeGreaterThan(15); // jittered, not one fixed wait
    expect(r.members()).toEqual(['10.0.0.1:8080:ready', '10.0.0.2:8080:ready']);
    expect(r.source.status.state).toBe('stale');
    expect(r.log.find('watch failed')).toHaveLength(1); // once per state, not per request
    r.api.failNext(0, 503);
    r.api.setSlice('shop', 'api-0', 'api', pods(3));
    await until(() => r.source.counts.backoffs === 31, 'the last failure');
    await r.timers.advance(1000);
    await until(() => r.source.version === 2, 'recovered');
    expect(r.log.find('discovery recovered')).toHaveLength(1);
  });

  it('an unreachable API server keeps the last good membership, logs once, and is followed again when it is back', async () => {
    const r = await rig();
    await r.api.watching();
    const port = r.api.port;
    await r.api.stopListening();
    for (let i = 0; i < 10; i++) {
      await until(() => r.source.counts.backoffs === i + 1, 'a failed attempt');
      await r.timers.advance(1000);
    }
    expect(r.members()).toHaveLength(2);
    expect(r.source.connected).toBe(false);
    expect(r.log.find('failed:')).toHaveLength(1);
    await until(() => r.source.counts.backoffs === 11, 'the 11th attempt refused');
    r.api.setSlice('shop', 'api-0', 'api', pods(5));
    await r.api.listen(port);
    await r.timers.advance(1000);
    await until(() => r.source.version === 2, 'back');
    expect(r.members()).toHaveLength(5);
    expect(r.source.status.state).toBe('ok');
  });

  it('a slice with no ready endpoint never empties a working membership (held, logged once, counted)', async () => {
    const r = await rig();
    await r.api.watching();
    r.api.setSlice('shop', 'api-0', 'api', pods(2, { ready: false }));
    r.api.setSlice('shop', 'api-0', 'api', []);
    await until(() => r.source.status.errors.empty === 2, 'both answers seen');
    expect(r.source.version).toBe(1);
    expect(r.members()).toEqual(['10.0.0.1:8080:ready', '10.0.0.2:8080:ready']);
    expect(r.log.find('no ready endpoint')).toHaveLength(1);
    expect(r.source.status.state).toBe('stale');
    r.api.setSlice('shop', 'api-0', 'api', pods(1));
    await until(() => r.source.version === 2, 'a good answer');
    expect(r.source.status).toMatchObject({ state: 'ok', records: 1 });
  });

  it('a malformed object or line changes nothing; the next good event applies', async () => {
    const r = await rig();
    await r.api.watching();
    r.api.setObject('shop', 'api-0', 'api', { metadata: { name: 'api-0' }, addressType: 'IPv4', endpoints: 'nope' });
    r.api.rawLine('{"type":"MODIFIED","object":');
    r.api.rawLine('not json');
    await until(() => r.source.status.errors.malformed === 3, 'three malformed answers');
    expect(r.members()).toHaveLength(2);
    r.api.setSlice('shop', 'api-0', 'api', pods(3));
    await until(() => r.source.version === 2, 'the good event');
    expect(r.members()).toHaveLength(3);
  });

  it('a membership the Balancer rejects is not counted as delivered; the version does not move', async () => {
    const api = await startKubeApi();
    cleanups.push(() => api.stop());
    api.setSlice('shop', 'api-0', 'api', pods(1));
    const source = sourceOn(api, 'shop/api');
    let calls = 0;
    await source.start(() => {
      calls++;
      if (calls === 2) throw new Error('refused');
    });
    await api.watching();
    api.setSlice('shop', 'api-0', 'api', pods(2));
    await until(() => source.status.errors.malformed === 1, 'the rejection');
    expect(source.version).toBe(1);
    api.setSlice('shop', 'api-0', 'api', pods(3));
    await until(() => source.version === 3, 'the next one, a higher version');
  });
});

describe('kubernetesSource: credentials and TLS', () => {
  it('in-cluster: the service account token is re-read as it rotates (a 401 re-reads it at once)', async () => {
    const api = await startKubeApi({ tokens: ['t1'] });
    cleanups.push(() => api.stop());
    api.setSlice('team', 'api-0', 'api', pods(1));
    const sa = writeServiceAccount(api, 't1', 'team');
    const timers = new ManualTimers();
    const source = kubernetesSource('api', {
      credentials: 'in-cluster',
      serviceAccountDir: sa.dir,
      env: sa.env,
      timers,
      tokenRefreshMs: 3_600_000,
      backoff: { baseMs: 100, maxMs: 1000 },
      logger: captureLog().logger,
    });
    cleanups.push(() => source.close());
    await source.start(() => {});
    expect(source.version).toBe(1); // namespace "team" from the service account
    await api.watching();
    writeFileSync(path.join(sa.dir, 'token'), 't2');
    api.tokens = new Set(['t2']);
    api.setSlice('team', 'api-0', 'api', pods(2));
    api.endWatches();
    await until(() => api.counts.unauthorized === 1 && source.counts.backoffs === 1, 'the old token refused');
    await timers.advance(1000);
    await until(() => source.version === 2, 'followed with the new token');
    expect(api.counts.unauthorized).toBe(1);
  });

  it('TLS is verified: without the CA nothing is accepted; insecure-skip-tls-verify is honoured only when set', async () => {
    const api = await startKubeApi();
    cleanups.push(() => api.stop());
    api.setSlice('shop', 'api-0', 'api', pods(1));
    const unverified = sourceOn(api, 'shop/api', { noCa: true }, { startTimeoutMs: 0 });
    await unverified.start(() => {});
    await until(() => unverified.status.errors.unreachable === 1, 'the certificate refused');
    expect(unverified.version).toBe(0);
    expect(unverified.problem?.code).toBe('Unavailable');
    expect(api.counts.requests).toBe(0);
    const insecure = sourceOn(api, 'shop/api', { noCa: true, insecure: true });
    await insecure.start(() => {});
    expect(insecure.version).toBe(1);
  });

  it('a kubeconfig with a client certificate and inline CA data', async () => {
    const api = await startKubeApi({ clientCert: true, tokens: [] });
    cleanups.push(() => api.stop());
    api.setSlice('shop', 'api-0', 'api', pods(2));
    const source = sourceOn(api, 'shop/api', { caInline: true });
    await source.start(() => {});
    expect(source.version).toBe(1);
  });

  it('refuses what it cannot use, naming it', async () => {
    const api = await startKubeApi();
    cleanups.push(() => api.stop());
    const file = writeKubeconfig(api);
    writeFileSync(
      file,
      `${(await import('node:fs')).readFileSync(file, 'utf8').replace('    token: test-token', '    exec:\n      command: aws')}`,
    );
    const err = await rejection(kubernetesSource('shop/api', { kubeconfig: file, logger: captureLog().logger }).start(() => {}));
    expect(err.message).toBe(
      'kubeconfig.users.u.exec: credential plugins are not supported (they run programs); give the user a token, tokenFile or client certificate',
    );
    const missing = await rejection(
      kubernetesSource('shop/api', { kubeconfig: path.join(api.dir, 'nope'), logger: captureLog().logger }).start(() => {}),
    );
    expect(missing.message).toMatch(/^kubeconfig: cannot read .*nope/);
    const outside = await rejection(
      kubernetesSource('shop/api', { credentials: 'in-cluster', env: {}, logger: captureLog().logger }).start(() => {}),
    );
    expect(outside.message).toContain('KUBERNETES_SERVICE_HOST is not set');
  });
});
