/**
 * acquireAsync({ intent })'s wait for first role verdicts (runtime/publication-wait.ts):
 * a refusal drawn from a view older than the table is tried again, even when
 * nothing is pending any more. The race it closes (seen once in a Node 22 CI
 * run of test/integration/ready-pg.test.ts): a worker draws from its view,
 * the owner writes the role and settles the first verdict, the refusal
 * arrives — and with nothing pending the old wait threw the stale refusal.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { PoiseError } from '../../src/core/errors.js';
import { Balancer } from '../../src/runtime/balancer.js';
import type { Lease } from '../../src/runtime/lease.js';
import { FirstVerdictWait, type VerdictWaitHost } from '../../src/runtime/publication-wait.js';

const balancers: Balancer[] = [];
afterEach(() => {
  for (const b of balancers.splice(0)) b.close();
});

function rig(): { wait: FirstVerdictWait; admits: () => number; bump: () => void } {
  const b = new Balancer();
  balancers.push(b);
  const t = b.ownerTable;
  let admits = 0;
  const lease = { id: 'primary' } as unknown as Lease;
  const host: VerdictWaitHost = {
    closed: false,
    members: () => [], // nothing awaits a first verdict any more
    admit: () => {
      admits++;
      return Promise.resolve(lease);
    },
  };
  return { wait: new FirstVerdictWait(t.epochs, t.verdicts, host), admits: () => admits, bump: () => t.epochs.bumpHealth() };
}

const refusal = () => new PoiseError('NoEligibleCandidates', "acquire({ intent: 'write' }): no backend is a known primary");

describe('FirstVerdictWait.after', () => {
  it('a refusal from before a change of the table is tried again (once), even with no first verdict pending', async () => {
    const r = rig();
    const attempted = r.wait.epoch();
    r.bump(); // the role written and its verdict settled after the attempt began
    await expect(r.wait.after(refusal(), { intent: 'write' }, performance.now(), attempted)).resolves.toEqual({ id: 'primary' });
    expect(r.admits()).toBe(1);
  });

  it('a refusal from the table as it is, with nothing pending, is the answer: no retry', async () => {
    const r = rig();
    const attempted = r.wait.epoch();
    await expect(r.wait.after(refusal(), { intent: 'write' }, performance.now(), attempted)).rejects.toMatchObject({
      code: 'NoEligibleCandidates',
    });
    expect(r.admits()).toBe(0);
  });
});
