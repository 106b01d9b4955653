/** StaticMembership feeding a real Balancer through bindMembership; a Router in this thread follows. */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { Balancer } from '../../src/runtime/balancer.js';
import { StaticMembership } from '../../src/membership/static.js';
import { bindMembership } from '../../src/membership/source.js';
import { captureLog, until } from '../helpers/log-capture.js';

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
    const binding = await bindMembership(new StaticMembership({ file }, { debounceMs: 10, logger: log.logger }), balancer, { logger: log.logger });
    const router = balancer.router({ policy: 'maglev' });
    expect(binding.version).toBe(1);
    expect(router.version).toBe(1);

    writeFileSync(file, doc(['a', 'b', 'c']));
    await until(() => balancer.version === 2, 'balancer at version 2');
    expect(router.version).toBe(2);
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
});
