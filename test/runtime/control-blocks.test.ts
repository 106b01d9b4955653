// The one precedence rule of the Balancer's control blocks (runtime/control-blocks.ts),
// as a table: for every block, what an option sets, what a snapshot that carries the
// block, one that does not, and an array of backends leave in force.
import { describe, expect, it } from 'vitest';
import { PoiseError } from '../../src/core/errors.js';
import { resolveHealthConfig } from '../../src/health/config.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { resolveConnectionBudget } from '../../src/runtime/connection-budget-options.js';
import { BLOCK_NAMES, blocksInForce, type BlockName, type ControlBlocks } from '../../src/runtime/control-blocks.js';
import { resolveRetryBudget } from '../../src/runtime/retry-budget.js';
import { resolveSlowStart } from '../../src/runtime/slow-start-options.js';
import { createLogger } from '../../src/log.js';

/** Per block: an option value, a different document value, and each resolved as the block's own resolver does. */
const VALUES: Record<BlockName, { option: unknown; document: unknown; off: unknown }> = {
  health: { option: { outlier: { intervalMs: 1000 } }, document: { check: { kind: 'tcp' } }, off: {} },
  retryBudget: { option: { ratio: 0.1 }, document: { ratio: 0.3 }, off: false },
  slowStart: { option: { windowMs: 1000 }, document: { windowMs: 5000 }, off: false },
  connectionBudget: { option: { limitPerBackend: 10 }, document: { limitPerBackend: 20 }, off: false },
};

function resolved(name: BlockName, value: unknown, field: string, document: boolean): unknown {
  if (name === 'health') return value === undefined ? {} : resolveHealthConfig(value, field, document);
  if (name === 'retryBudget') return value === undefined || value === false ? undefined : resolveRetryBudget(value, field);
  if (name === 'slowStart') return resolveSlowStart(value, field);
  return resolveConnectionBudget(value, field);
}

type Input = 'none' | 'option';
type Snapshot = 'array' | 'without the block' | 'the block' | 'the block: false';

/** [option given?, what the next membership carries, the block in force afterwards: 'option' | 'document' | 'off'] */
const TABLE: [Input, Snapshot, 'option' | 'document' | 'off'][] = [
  ['none', 'array', 'off'],
  ['none', 'without the block', 'off'],
  ['none', 'the block', 'document'],
  ['none', 'the block: false', 'off'],
  ['option', 'array', 'option'],
  ['option', 'without the block', 'option'],
  ['option', 'the block', 'document'],
  ['option', 'the block: false', 'off'],
];

describe('blocksInForce: one precedence for every control block', () => {
  for (const name of BLOCK_NAMES) {
    for (const [option, snapshot, expected] of TABLE) {
      it(`${name}: option ${option}, then a snapshot with ${snapshot} → ${expected}`, () => {
        const v = VALUES[name];
        const first = blocksInForce(undefined, 'options', option === 'none' ? {} : { [name]: v.option });
        expect(first.blocks[name]).toEqual(resolved(name, option === 'none' ? undefined : v.option, `options.${name}`, false));
        const input =
          snapshot === 'array'
            ? []
            : {
                version: 1,
                backends: [],
                ...(snapshot === 'the block' ? { [name]: v.document } : snapshot === 'the block: false' ? { [name]: v.off } : {}),
              };
        const next = blocksInForce(first.blocks, 'membership', input);
        const want =
          expected === 'option'
            ? first.blocks[name]
            : expected === 'document'
              ? resolved(name, v.document, `membership.${name}`, true)
              : resolved(name, undefined, `membership.${name}`, true);
        expect(next.blocks[name]).toEqual(want);
        expect(next.carried.has(name)).toBe(snapshot === 'the block' || snapshot === 'the block: false');
        // The other blocks stay as they were.
        for (const other of BLOCK_NAMES) if (other !== name) expect(next.blocks[other]).toBe(first.blocks[other]);
      });
    }
  }

  it('a bad block is refused naming where it came from, and nothing in force changes', () => {
    const inForce: ControlBlocks = blocksInForce(undefined, 'options', { slowStart: { windowMs: 1000 } }).blocks;
    for (const name of BLOCK_NAMES) {
      expect(() => blocksInForce(undefined, 'options', { [name]: 'nope' })).toThrow(PoiseError);
      expect(() => blocksInForce(undefined, 'options', { [name]: 'nope' })).toThrow(`options.${name}`);
      expect(() => blocksInForce(inForce, 'membership', { version: 1, backends: [], [name]: 'nope' })).toThrow(`membership.${name}`);
    }
    expect(inForce.slowStart?.windowMs).toBe(1000);
  });

  it('through a Balancer: the option, then a document block, then a document without it', () => {
    const b = new Balancer({ capacity: 4, logger: createLogger({ level: 'silent' }), connectionBudget: { limitPerBackend: 10 } });
    try {
      b.update([{ id: 'a', address: '127.0.0.1:7000' }]);
      expect(b.connectionBudget?.limitPerBackend).toBe(10);
      b.apply({ version: 5, backends: [{ id: 'a', address: '127.0.0.1:7000' }], connectionBudget: { limitPerBackend: 20 } });
      expect(b.connectionBudget?.limitPerBackend).toBe(20);
      b.apply({ version: 6, backends: [{ id: 'a', address: '127.0.0.1:7000' }] });
      expect(b.connectionBudget?.limitPerBackend).toBe(20);
      b.apply({ version: 7, backends: [{ id: 'a', address: '127.0.0.1:7000' }], connectionBudget: false });
      expect(b.connectionBudget).toBeUndefined();
    } finally {
      b.close();
    }
  });
});
