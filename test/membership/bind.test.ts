/** StaticMembership feeding a real Balancer through bindMembership; a Router in this thread follows. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { MembershipSnapshot } from '../../src/core/spec.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { StaticMembership } from '../../src/membership/static.js';
import { bindMembership } from '../../src/membership/source.js';
import { captureLog } from '../helpers/log-capture.js';
import { until } from '../helpers/until.js';
import { rejection } from '../helpers/thrown.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'poise-bind-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('bindMembership with a Balancer', () => {
  it('file changes reach the Router; an invalid change leaves the Balancer and the Router on the last good version', async () => {
    const file = path.join(dir, 'members.json');
    const doc = (ids: string[], weight = 1) =>
      JSON.stringify({ cluster: 'db', backends: ids.map((id, i) => ({ id, address: `127.0.0.1:${7000 + i}`, weight })) });
    writeFileSync(file, doc(['a', 'b']));
    const log = captureLog();
    const balancer = new Balancer({ logger: log.logger });
    const binding = await bindMembership(new StaticMembership({ file }, { debounceMs: 10, logger: log.logger }), balancer, {
      logger: log.logger,
    });
    const router = balancer.router({ policy: 'maglev' });
    expect(binding.version).toBe(1);
    expect(router.version).toBe(1);

    writeFileSync(file, doc(['a', 'b', 'c']));
    await until(() => balancer.version === 2, 'balancer at version 2');
    expect(router.refresh()).toBe(2);
    const picked = new Set<string>();
    for (let k = 0; k < 300; k++) {
      const lease = router.acquire({ key: k });
      picked.add(lease.id);
      lease.release('success');
    }
    expect([...picked].sort()).toEqual(['a', 'b', 'c']);

    writeFileSync(file, doc(['a', 'b'], -2));
    await until(() => log.find('change rejected').length === 1, 'the rejection');
    expect(log.find('change rejected')[0]!['err']).toBe('backends[0].weight: must be an integer in [1, 4294967295], got -2');
    expect(balancer.version).toBe(2);
    expect(router.version).toBe(2);
    await binding.close();
    router.close();
    balancer.close();
  });

  it('a file change not newer than a direct update() is logged as ignored, never as applied; a newer one applies', async () => {
    const file = path.join(dir, 'mixed.json');
    const doc = (ids: string[], version?: number) =>
      JSON.stringify({
        cluster: 'db',
        ...(version === undefined ? {} : { version }),
        backends: ids.map((id, i) => ({ id, address: `127.0.0.1:${7100 + i}` })),
      });
    writeFileSync(file, doc(['a']));
    const sourceLog = captureLog();
    const balancer = new Balancer({ logger: captureLog().logger });
    const source = new StaticMembership({ file }, { debounceMs: 10, logger: sourceLog.logger });
    const binding = await bindMembership(source, balancer, { logger: captureLog().logger });
    expect(balancer.version).toBe(1);
    // Two direct updates share the Balancer's version space: it is at 3 now.
    balancer.update([{ id: 'direct', address: '127.0.0.1:7200' }]);
    balancer.update([
      { id: 'direct', address: '127.0.0.1:7200' },
      { id: 'direct2', address: '127.0.0.1:7201' },
    ]);
    expect(balancer.version).toBe(3);

    writeFileSync(file, doc(['a', 'b'])); // the file's version 2: not newer than 3
    await until(() => sourceLog.find('ignored').length === 1, 'the ignored line');
    const applied = () => sourceLog.records.filter((r) => r['msg'] === 'membership applied').map((r) => r['version']);
    expect(applied()).toEqual([1]);
    expect(sourceLog.find('ignored')[0]).toMatchObject({
      level: 40,
      msg: 'membership version 2 ignored: not newer than 3 in force',
      version: 2,
      inForce: 3,
    });
    expect(balancer.version).toBe(3);
    expect(binding.version).toBe(3);

    writeFileSync(file, doc(['a', 'b', 'c'], 10));
    await until(() => balancer.version === 10, 'the balancer at version 10');
    expect(applied()).toEqual([1, 10]);
    await binding.close();
    balancer.close();
  });

  it('refuses a second source on one Balancer (Conflict naming both); after close() another may bind', async () => {
    const balancer = new Balancer({ logger: captureLog().logger });
    const quiet = { logger: captureLog().logger };
    const first = await bindMembership(new StaticMembership({ backends: [{ id: 'a', address: '127.0.0.1:1' }] }, quiet), balancer, quiet);
    const second = new StaticMembership({ file: path.join(dir, 'never-read.json') }, quiet);
    const err = await rejection(bindMembership(second, balancer, quiet));
    expect(err.code).toBe('Conflict');
    expect(err.message).toBe(
      `bindMembership: the target already follows memory; refusing a second source (file ${path.join(dir, 'never-read.json')}): versions of two sources are not comparable. Close the first binding, or feed one source`,
    );
    expect(balancer.version).toBe(1);
    await first.close();
    const again = await bindMembership(
      new StaticMembership({ backends: [{ id: 'b', address: '127.0.0.1:2' }], version: 5 }, quiet),
      balancer,
      quiet,
    );
    expect(balancer.version).toBe(5);
    await again.close();
    balancer.close();
  });

  it("an update-only target applied a snapshot when it answers that snapshot's version", async () => {
    const log = captureLog();
    let inForce = 4;
    const target = { update: (s: MembershipSnapshot) => (inForce = Math.max(inForce, s.version)) };
    const src = new StaticMembership({ backends: [{ id: 'a', address: '127.0.0.1:1' }], version: 2 }, { logger: log.logger });
    const binding = await bindMembership(src, target, { logger: captureLog().logger });
    expect(log.find('membership version 2 ignored: not newer than 4 in force')).toHaveLength(1);
    expect(src.set([{ id: 'b', address: '127.0.0.1:2' }], 9)).toBe(9);
    expect(log.records.filter((r) => r['msg'] === 'membership applied').map((r) => r['version'])).toEqual([9]);
    expect(binding.version).toBe(9);
    await binding.close();
  });
});
