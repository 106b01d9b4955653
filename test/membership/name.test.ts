/** One cluster-name rule: the document, the Redis key builder and every flag parser accept and refuse the same names. */
import { describe, expect, it } from 'vitest';
import { parseBenchFlags } from '../../packages/bench/src/flags.js';
import { resolveDocument } from '../../src/membership/document.js';
import { NAME_RULE, nameProblem } from '../../src/membership/name.js';
import { membershipKeys } from '../../src/membership/redis-keys.js';

const accepts = (name: string): boolean[] => {
  const ok = (f: () => unknown): boolean => {
    try {
      f();
      return true;
    } catch {
      return false;
    }
  };
  return [
    nameProblem(name) === undefined,
    ok(() => resolveDocument({ cluster: name, backends: [] })),
    ok(() => membershipKeys(name)),
    ok(() => membershipKeys('c', name)),
    ok(() => parseBenchFlags(['--redis', 'redis://127.0.0.1:1', '--cluster', name])),
  ];
};

describe('the cluster-name rule', () => {
  it.each(['a', 'orders-db', 'eu.west_1', '0x', 'A'.repeat(128)])('%s is accepted everywhere', (name) => {
    expect(accepts(name)).toEqual([true, true, true, true, true]);
  });

  it.each(['a:b', '', '-a', '.a', '_a', 'a b', 'a/b', 'A'.repeat(129), 'é'])('%j is refused everywhere', (name) => {
    expect(accepts(name)).toEqual([false, false, false, false, false]);
    expect(nameProblem(name)).toBe(`must be ${NAME_RULE}`);
  });
});
