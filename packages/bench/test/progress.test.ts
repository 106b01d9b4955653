import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { Progress } from '../src/progress.js';

function sink(isTTY: boolean): { stream: Writable & { isTTY?: boolean }; text: () => string } {
  const chunks: string[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _enc, cb) {
      chunks.push(chunk.toString());
      cb();
    },
  }) as Writable & { isTTY?: boolean };
  stream.isTTY = isTTY;
  return { stream, text: () => chunks.join('') };
}

describe('bench progress', () => {
  it('on a TTY rewrites one line in place and clears it when done', () => {
    const s = sink(true);
    const p = new Progress(s.stream);
    p.update('a');
    p.update('b');
    p.done();
    expect(s.text()).toBe('\r\x1b[2Ka\r\x1b[2Kb\r\x1b[2K');
  });

  it('otherwise writes plain lines, at most one a second unless forced', () => {
    const s = sink(false);
    let now = 0;
    const p = new Progress(s.stream, () => now);
    p.update('first');
    now = 999;
    p.update('dropped'); // within a second of the last line
    p.update('forced', true);
    now = 2000;
    p.update('a second later');
    p.done();
    expect(s.text()).toBe('first\nforced\na second later\n');
  });
});
