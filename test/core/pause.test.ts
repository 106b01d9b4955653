import { describe, expect, it } from 'vitest';
import { hasAtomicsPause, spinPause } from '../../src/core/pause.js';

describe('spinPause', () => {
  it('uses Atomics.pause exactly when the runtime has it (Node ≥ 24), and is callable either way', () => {
    expect(hasAtomicsPause()).toBe(typeof (Atomics as unknown as { pause?: unknown }).pause === 'function');
    expect(() => {
      for (let i = 0; i < 1000; i++) spinPause();
    }).not.toThrow();
  });
});
