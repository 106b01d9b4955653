import { afterEach, describe, expect, it } from 'vitest';
import { FlowController } from '../src/admission/flow-controller.js';
import { holdbackCeilings } from '../src/admission/holdback.js';
import { PeakEwma } from '../src/load/peak-ewma.js';
import { Maglev } from '../src/policy/maglev.js';
import { PowerOfTwo } from '../src/policy/power-of-two.js';
import { PriorityWeightedRandom } from '../src/policy/priority/policy.js';
import { Rendezvous } from '../src/policy/rendezvous.js';
import { RoundRobin } from '../src/policy/round-robin.js';
import { Balancer } from '../src/runtime/balancer.js';
import { thrown } from './helpers/thrown.js';

// Misspelled options are refused, never silently defaulted, by every public
// constructor: one table across modules, because the law is the same.

const balancers: Balancer[] = [];
afterEach(() => {
  for (const b of balancers.splice(0)) b.close();
});

function tracked(): Balancer {
  const balancer = new Balancer({ capacity: 8 });
  balancers.push(balancer);
  return balancer;
}

describe('misspelled options are refused, never silently defaulted', () => {
  it('every policy still accepts { seed } (DESIGN: exact replay), the keyed ones included', () => {
    for (const make of [
      () => new Rendezvous({ seed: 1 }),
      () => new Maglev({ seed: 1, tableSize: 7 }),
      () => new RoundRobin({ seed: 1 }),
      () => new PowerOfTwo({ seed: 1 }),
    ]) {
      expect(make).not.toThrow();
    }
  });

  it.each([
    ['Balancer', () => new Balancer({ capcity: 8 } as never), 'options.capcity: unknown option (accepted: capacity, maxThreads,'],
    ['Router', () => tracked().router({ polcy: 'random' } as never), 'options.polcy: unknown option (accepted: policy,'],
    [
      'ejection',
      () => tracked().router({ ejection: { consecutiveFailure: 1 } } as never),
      'options.ejection.consecutiveFailure: unknown option',
    ],
    ['PowerOfTwo', () => new PowerOfTwo({ sed: 1 } as never), 'options.sed: unknown option (accepted: seed)'],
    ['RoundRobin', () => new RoundRobin({ seeds: 1 } as never), 'options.seeds: unknown option (accepted: seed)'],
    ['Rendezvous', () => new Rendezvous({ hashseed: 1n } as never), 'options.hashseed: unknown option (accepted: hashSeed, seed)'],
    [
      'Maglev',
      () => new Maglev({ size: 7 } as never),
      'options.size: unknown option (accepted: hashSeed, tableSize, seed, balanceFactor, totalLoad)',
    ],
    ['PeakEwma', () => new PeakEwma({ tau: 10 } as never), 'options.tau: unknown option (accepted: tauMs, initialMs, clock)'],
    [
      'PriorityWeightedRandom',
      () => new PriorityWeightedRandom({ overprovisioning: 150 } as never),
      'options.overprovisioning: unknown option',
    ],
    ['holdbackCeilings', () => holdbackCeilings([1, 0], { minCeiling: 0.5, max: 1 } as never), 'options.max: unknown option'],
    [
      'FlowController',
      () => new FlowController({ capacity: 2, priorities: [0], minCeiling: 0, queue: 3 } as never),
      'options.queue: unknown option',
    ],
  ])('%s', (_name, make, message) => {
    const err = thrown(make);
    expect(err.code).toBe('InvalidConfig');
    expect(err.message).toContain(message);
  });
});
