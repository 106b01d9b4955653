import { afterEach, describe, expect, it } from 'vitest';
import { Balancer } from '../../src/runtime/balancer.js';
import type { Router } from '../../src/runtime/router.js';

// Bad input from a caller gets a PoiseError naming the field, never a TypeError
// from deep inside, and never a silently ignored option.

const balancers: Balancer[] = [];
afterEach(() => {
  for (const b of balancers.splice(0)) b.close();
});

function routerOver(ids: string[]): Router {
  const balancer = new Balancer({ capacity: 8 });
  balancers.push(balancer);
  balancer.update(ids.map((id, i) => ({ id, address: `127.0.0.1:${7000 + i}` })));
  return balancer.router({ policy: 'round-robin' });
}

describe('acquire({ exclude })', () => {
  it('takes a Set or an array of ids, and excluded backends are never chosen', () => {
    const router = routerOver(['a', 'b', 'c']);
    for (let i = 0; i < 30; i++) {
      const fromArray = router.acquire({ exclude: ['a', 'b'] });
      expect(fromArray.id).toBe('c');
      fromArray.release('success');
      const fromSet = router.acquire({ exclude: new Set(['c']) });
      expect(fromSet.id).not.toBe('c');
      fromSet.release('success');
    }
  });

  it('refuses anything else, naming the option', () => {
    const router = routerOver(['a', 'b']);
    expect(() => router.acquire({ exclude: 'a' as never })).toThrow(
      'acquire(options).exclude: must be a Set or an array of backend ids, got "a"',
    );
    expect(router.openLeases).toBe(0);
  });
});
