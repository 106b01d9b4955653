/**
 * `poise proxy` under a low descriptor limit. Node 20's ESM loader reads a
 * module's static imports concurrently, each file open until read, so the
 * proxy held 45 module files open while it started and died with EMFILE
 * under `ulimit -n 64`; its module graphs now load one file at a time
 * (src/core/ordered-import.ts; the walk's laws: test/core/ordered-import.test.ts).
 * Node 22.23, 24 and 26 read module files synchronously: there these pass
 * on the old build too, and guard the descriptors the proxy holds.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { reusePortSupported } from '../../../dist/src/net.js';
import { fileEchoServer } from '../../helpers/echo-server.js';
import { freePort } from '../../helpers/ports.js';
import { startProxy } from '../../helpers/proxy-process.js';

const ORDERED = new URL('../../../dist/src/core/ordered-import.js', import.meta.url).href;
const a = fileEchoServer('a');
const b = fileEchoServer('b');
const dir = mkdtempSync(path.join(os.tmpdir(), 'poise-descriptors-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** `n` clients connected at once through port, each sending one byte and holding its connection until all have their reply; resolves with the replies. */
function heldClients(port: number, n: number): Promise<string[]> {
  const sockets: net.Socket[] = [];
  const replies = Array.from(
    { length: n },
    (_, i) =>
      new Promise<string>((resolve, reject) => {
        const s = net.connect({ host: '127.0.0.1', port }, () => s.write(String(i % 10)));
        sockets.push(s);
        s.once('data', (d) => resolve(d.toString()));
        s.once('error', reject);
        s.once('close', () => reject(new Error(`client ${i} closed without a reply`)));
      }),
  );
  return Promise.all(replies).finally(() => {
    for (const s of sockets) s.destroy();
  });
}

describe('poise proxy under ulimit -n 64', () => {
  // --workers 2: two accepting threads where reusePort exists (Node >= 22.12), one worker thread on Node 20.
  it.each([0, 2])('--workers %i starts, proxies 12 clients held at once, and stops with exit 0', async (workers) => {
    const listen = await freePort();
    const args = ['--listen', `127.0.0.1:${listen}`, '--workers', String(workers), '--policy', 'round-robin'];
    const p = startProxy([...args, '--backend', `a=127.0.0.1:${a.port}`, '--backend', `b=127.0.0.1:${b.port}`], {}, { descriptors: 64 });
    try {
      await p.until((r) => r.some((x) => x['msg'] === 'proxy ready'), 'the proxy to be ready');
      // The limit is the child's own (soft and hard), not the shell's.
      expect(readFileSync(`/proc/${p.child.pid}/limits`, 'utf8')).toMatch(/^Max open files\s+64\s+64\s/m);
      const ready = p.find('proxy ready')[0]!;
      expect(ready['threads']).toBe(workers === 0 ? 1 : reusePortSupported() ? 2 : 1);
      // 12 clients and their 12 upstreams held at once: 24 descriptors more than at rest.
      const replies = await heldClients(listen, 12);
      const by = (name: string): number => replies.filter((r) => r.startsWith(`${name}:`)).length;
      expect(replies.every((r) => /^[ab]:\d$/.test(r))).toBe(true);
      // Round robin in each accepting thread: with two threads each alternates on its own, so both backends serve.
      expect(by('a') + by('b')).toBe(12);
      expect(Math.min(by('a'), by('b'))).toBeGreaterThanOrEqual(workers > 0 && reusePortSupported() ? 1 : 6);
      expect(p.find('local resource exhausted')).toEqual([]);
      expect(await p.stop()).toBe(0);
    } finally {
      p.kill();
    }
  });
});

describe('a module graph loaded one file at a time', () => {
  /**
   * Writes a graph into `root`: `entry.js` imports m0..m(n-1) (one frontier
   * of n files, what Node 20 opens at once), each mi imports `shared.js`,
   * and m0 imports `c.js`, which imports m0 back (a cycle); every module
   * records its evaluation on globalThis.order.
   */
  function writeGraph(root: string, n: number): void {
    mkdirSync(root, { recursive: true });
    const record = (name: string): string => `(globalThis.order ??= []).push('${name}');\n`;
    writeFileSync(path.join(root, 'shared.js'), record('shared'));
    writeFileSync(path.join(root, 'c.js'), `import './m0.js';\n${record('c')}`);
    for (let i = 0; i < n; i++) {
      writeFileSync(path.join(root, `m${i}.js`), `import './shared.js';\n${i === 0 ? "import './c.js';\n" : ''}${record(`m${i}`)}`);
    }
    writeFileSync(
      path.join(root, 'entry.js'),
      `${Array.from({ length: n }, (_, i) => `import './m${i}.js';`).join('\n')}\n${record('entry')}`,
    );
  }

  /** Runs `script` (an ES module) under `ulimit -n limit`; its stdout, or the error's first line. */
  function run(script: string, limit: number): string {
    try {
      const quoted = `'${script.replaceAll("'", "'\\''")}'`;
      return execFileSync('sh', ['-c', `ulimit -n ${limit} && exec '${process.execPath}' --input-type=module -e ${quoted}`], {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      });
    } catch (err) {
      return `failed: ${String((err as { stderr?: string }).stderr ?? err)
        .split('\n')
        .find((l) => l.includes('Error'))}`;
    }
  }

  it('evaluates in the native order (a cycle included) and loads 200 sibling modules under ulimit -n 32', () => {
    writeGraph(path.join(dir, 'native'), 200);
    writeGraph(path.join(dir, 'ordered'), 200);
    const native = new URL(`file://${path.join(dir, 'native', 'entry.js')}`).href;
    const ordered = new URL(`file://${path.join(dir, 'ordered', 'entry.js')}`).href;
    const show = 'process.stdout.write(globalThis.order.join(","));';
    const nativeOrder = run(`await import('${native}');\n${show}`, 1024);
    expect(nativeOrder.split(',')).toHaveLength(203);
    const script = `import { importInOrder } from '${ORDERED}';\nawait importInOrder(new URL('${ordered}'));\n${show}`;
    expect(run(script, 1024)).toBe(nativeOrder);
    // Under 32 descriptors: one module file open at a time.
    expect(run(script, 32)).toBe(nativeOrder);
  });
});
