/**
 * `poise members` end to end: the compiled CLI (dist/, built by `npm test`'s
 * pretest) against a real redis-server on a free port.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { command } from '../../src/cli/members.js';
import { freePort } from '../helpers/ports.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { until } from '../helpers/until.js';
import { CLI, runCli, type CliResult } from '../helpers/cli.js';

const poise = runCli;

describe('poise members (CLI)', () => {
  let redis: TestRedis;
  let admin: Redis;
  let dir: string;
  const m = (sub: string, ...rest: string[]) => poise(['members', sub, '--redis', redis.url, '--cluster', 'cli', ...rest]);
  beforeAll(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url);
    dir = mkdtempSync(path.join(os.tmpdir(), 'poise-cli-'));
  });
  afterAll(async () => {
    admin?.disconnect();
    await redis?.stop();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  /** Runs `poise members ...` in this process (fast), capturing stdout and stderr. */
  async function inProcess(args: string[]): Promise<CliResult> {
    let stdout = '';
    let stderr = '';
    const out = vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => ((stdout += String(chunk)), true));
    const err = vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => ((stderr += String(chunk)), true));
    try {
      const code = await command.run(args);
      return { code, stdout, stderr };
    } finally {
      out.mockRestore();
      err.mockRestore();
    }
  }

  it('every subcommand answers --help with exit 0; the binary lists the command', async () => {
    for (const sub of ['apply', 'add', 'remove', 'drain', 'undrain', 'weight', 'show', 'watch']) {
      const r = await inProcess([sub, '--help']);
      expect(r.code, sub).toBe(0);
      expect(r.stdout).toContain(`usage: poise members ${sub}`);
      expect(r.stdout).toContain('exit codes: 0 ok, 1 runtime failure');
    }
    expect((await inProcess(['--help'])).stdout).toContain('watch    [--count N] [--json]');
    const top = await poise(['--help']);
    expect(top.code).toBe(0);
    expect(top.stdout).toMatch(/^\s+members\s+operate the Redis membership control plane/m);
  });

  it('usage errors exit 2 and name the flag', async () => {
    expect(await inProcess(['frobnicate'])).toMatchObject({ code: 2 });
    const noRedis = await inProcess(['show', '--cluster', 'x']);
    expect(noRedis.code).toBe(2);
    expect(noRedis.stderr).toContain('--redis: required (or --sentinel, --redis-cluster, or set POISE_REDIS_URL)');
    const badUrl = await inProcess(['show', '--cluster', 'x', '--redis', 'http://x']);
    expect(badUrl.stderr).toContain(
      '--redis: must be a redis:// or rediss:// URL with a host, or redis+sentinel://host:port[,host:port...]/master-name[?db=N], got "http://x"',
    );
    const badFlag = await inProcess(['add', 'a', '127.0.0.1:1', '--redis', redis.url, '--cluster', 'cli', '--wieght', '2']);
    expect(badFlag.code).toBe(2);
    expect(badFlag.stderr).toContain('unknown flag --wieght');
    const badCount = await inProcess(['watch', '--redis', redis.url, '--cluster', 'cli', '--count', 'x']);
    expect(badCount.code).toBe(2);
    expect(badCount.stderr).toContain('--count: must be an integer in [1, 9007199254740991], got "x"');
    const missingArg = await inProcess(['weight', 'a', '--redis', redis.url, '--cluster', 'cli']);
    expect(missingArg.stderr).toContain('expected ID WEIGHT, got 1 argument(s)');
  });

  it('apply / add / drain / weight / remove / show, with exit codes 0, 3, 4 and 5', async () => {
    // The compiled binary for apply, show and stdin; the same command in-process for the rest (faster).
    const mi = (sub: string, ...rest: string[]) => inProcess([sub, '--redis', redis.url, '--cluster', 'cli', ...rest]);
    expect(await m('show')).toMatchObject({ code: 4 });
    const file = path.join(dir, 'members.yaml');
    writeFileSync(
      file,
      'cluster: cli\nbackends:\n  - { id: a, address: "127.0.0.1:7001" }\n  - { id: b, address: "127.0.0.1:7002", weight: 2 }\n',
    );
    expect(await m('apply', file)).toMatchObject({ code: 0, stdout: '1\n' });
    expect(await mi('add', 'c', '127.0.0.1:7003', '--weight', '5', '--locality', 'z1')).toMatchObject({ code: 0, stdout: '2\n' });
    expect(await mi('drain', 'a')).toMatchObject({ code: 0, stdout: '3\n' });
    expect(await mi('weight', 'b', '7')).toMatchObject({ code: 0, stdout: '4\n' });
    expect(await mi('undrain', 'a')).toMatchObject({ code: 0, stdout: '5\n' });
    expect(await mi('remove', 'c')).toMatchObject({ code: 0, stdout: '6\n' });

    const neg = await mi('weight', 'b', '-2');
    expect(neg.code).toBe(3);
    expect(neg.stderr).toContain('weight: must be an integer in [1, 4294967295], got -2');
    const dup = await mi('add', 'a', '127.0.0.1:7009');
    expect(dup.code).toBe(3);
    expect(dup.stderr).toContain('backend.id: "a" already exists');
    const badType = await mi('add', 'x', '127.0.0.1:7009', '--priority', 'high');
    expect(badType.code).toBe(3);
    expect(badType.stderr).toContain('backend.priority: must be an integer in [0, 4294967295], got "high"');
    const bad = path.join(dir, 'bad.json');
    writeFileSync(
      bad,
      JSON.stringify({
        cluster: 'cli',
        backends: [
          { id: 'a', address: '127.0.0.1:1' },
          { id: 'a', address: '127.0.0.1:2' },
        ],
      }),
    );
    const dupDoc = await mi('apply', bad);
    expect(dupDoc.code).toBe(3);
    expect(dupDoc.stderr).toContain('backends[1].id: duplicate id "a" (first at backends[0])');
    writeFileSync(bad, '{"cluster": "cli", "backends": [');
    expect((await mi('apply', bad)).stderr).toContain('document: malformed JSON');
    expect(await mi('drain', 'nope')).toMatchObject({ code: 4 });
    expect(await mi('apply', file, '--if-version', '2')).toMatchObject({ code: 5 });
    expect(await mi('apply', file, '--version', '3')).toMatchObject({ code: 5 });

    const shown = await m('show', '--json');
    expect(shown.code).toBe(0);
    const json = JSON.parse(shown.stdout) as { lineage: string };
    expect(json).toEqual({
      version: 6,
      lineage: expect.stringMatching(/^[0-9a-f]{32}$/),
      document: {
        cluster: 'cli',
        backends: [
          { id: 'a', address: '127.0.0.1:7001' },
          { id: 'b', address: '127.0.0.1:7002', weight: 7 },
        ],
      },
    });
    // The default is the operator's table: version, lineage, one row per backend with its status, weight, priority, locality.
    const table = await m('show');
    expect(table.code).toBe(0);
    expect(table.stdout).toBe(
      [
        `cluster cli  version 6  lineage ${json.lineage}  backends 2`,
        'BACKEND  STATUS  WEIGHT  PRIORITY  LOCALITY  ADDRESS',
        'a        ready        1         0  -         127.0.0.1:7001',
        'b        ready        7         0  -         127.0.0.1:7002',
        '',
      ].join('\n'),
    );
    // stdin, JSON
    const viaStdin = await poise(
      ['members', 'apply', '-', '--redis', redis.url, '--cluster', 'cli', '--if-version', '6'],
      JSON.stringify({ cluster: 'cli', backends: [] }),
    );
    expect(viaStdin).toMatchObject({ code: 0, stdout: '7\n' });
  });

  it('--notices full publishes the whole snapshot; the default publishes a delta; anything else exits 2', async () => {
    const mi = (sub: string, ...rest: string[]) => inProcess([sub, '--redis', redis.url, '--cluster', 'notices', ...rest]);
    const sub = admin.duplicate();
    const seen: Record<string, unknown>[] = [];
    sub.on('message', (_channel: string, text: string) => seen.push(JSON.parse(text) as Record<string, unknown>));
    await sub.subscribe('poise:notices:notices');
    try {
      expect(await mi('add', 'a', '127.0.0.1:7001')).toMatchObject({ code: 0, stdout: '1\n' });
      expect(await mi('add', 'b', '127.0.0.1:7002')).toMatchObject({ code: 0, stdout: '2\n' });
      expect(await mi('weight', 'b', '3')).toMatchObject({ code: 0, stdout: '3\n' });
      expect(await mi('weight', 'b', '4', '--notices', 'full')).toMatchObject({ code: 0, stdout: '4\n' });
      expect(await mi('drain', 'a', '--notices', 'delta')).toMatchObject({ code: 0, stdout: '5\n' });
      await until(() => seen.length === 5, 'five notices');
      const byVersion = new Map(seen.map((n) => [n['version'], n]));
      // Version 3: a delta naming its base; version 4: the whole document, as earlier releases published it.
      expect(byVersion.get(3)).toMatchObject({ version: 3, base: 2, ops: [{ op: 'replace', backend: { id: 'b', weight: 3 } }] });
      expect(byVersion.get(4)).not.toHaveProperty('ops');
      expect(byVersion.get(4)).toMatchObject({
        version: 4,
        document: {
          cluster: 'notices',
          backends: [
            { id: 'a', address: '127.0.0.1:7001' },
            { id: 'b', address: '127.0.0.1:7002', weight: 4 },
          ],
        },
      });
      expect(byVersion.get(5)).toMatchObject({ version: 5, base: 4 });
      const bad = await mi('weight', 'b', '5', '--notices', 'half');
      expect(bad.code).toBe(2);
      expect(bad.stderr).toContain('--notices: must be one of delta, full, got "half"');
      expect(await admin.get('poise:notices:snapshot')).toContain('"version":5');
    } finally {
      sub.disconnect();
    }
  });

  it('the version ceiling: 2^53 − 1 is stored and read; the next write exits 6 and stores nothing; above it is refused', async () => {
    const c = (sub: string, ...rest: string[]) => inProcess([sub, '--redis', redis.url, '--cluster', 'ceiling', ...rest]);
    const file = path.join(dir, 'ceiling.json');
    writeFileSync(file, JSON.stringify({ cluster: 'ceiling', backends: [{ id: 'a', address: '127.0.0.1:7001' }] }));
    expect(await c('apply', file, '--version', '9007199254740991')).toMatchObject({ code: 0, stdout: '9007199254740991\n' });
    const shown = await c('show', '--json');
    expect(shown.code).toBe(0);
    expect(JSON.parse(shown.stdout).version).toBe(9007199254740991);
    const stored = await admin.get('poise:ceiling:snapshot');
    expect(stored).toMatch(/^\{"version":9007199254740991,"lineage":"[0-9a-f]{32}","document":/);
    // Every kind of write at the ceiling: exit 6, the reason named, the stored value untouched.
    for (const args of [
      ['add', 'b', '127.0.0.1:7002'],
      ['drain', 'a'],
      ['weight', 'a', '2'],
      ['apply', file],
    ]) {
      const r = await c(args[0]!, ...args.slice(1));
      expect(r.code, args.join(' ')).toBe(6);
      expect(r.stderr).toContain(
        'version: the stored version 9007199254740991 has reached the ceiling 9007199254740991; nothing written (delete the snapshot key to start a new lineage from version 1)',
      );
    }
    expect(await admin.get('poise:ceiling:snapshot')).toBe(stored);
    // Beyond the ceiling: a flag out of range is usage (2); a document field out of range is validation (3).
    const flag = await c('apply', file, '--version', '9007199254740992');
    expect(flag.code).toBe(2);
    expect(flag.stderr).toContain('--version: must be an integer in [1, 9007199254740991], got "9007199254740992"');
    writeFileSync(file, '{"cluster": "ceiling", "version": 9007199254740992, "backends": []}');
    const field = await c('apply', file);
    expect(field.code).toBe(3);
    expect(field.stderr).toContain('version: must be an integer in [0, 9007199254740991], got 9007199254740992');
    expect(await admin.get('poise:ceiling:snapshot')).toBe(stored);
  });

  it('a stored version outside [0, 2^53 − 1] (as the old script wrote) and a garbage snapshot: show exits 7 naming the field', async () => {
    const c = (sub: string, ...rest: string[]) => inProcess([sub, '--redis', redis.url, '--cluster', 'garbage', ...rest]);
    await admin.set('poise:garbage:snapshot', '{"version":9007199254740992,"document":{"cluster":"garbage","backends":[]}}');
    const big = await c('show');
    expect(big.code).toBe(7);
    expect(big.stderr).toContain('snapshot.version: must be an integer in [0, 9007199254740991], got 9007199254740992');
    // A write on top of it cannot bump it: the script refuses at the ceiling (6), the read-modify-write refuses to read it (7).
    const doc = path.join(dir, 'garbage.json');
    writeFileSync(doc, JSON.stringify({ cluster: 'garbage', backends: [] }));
    const apply = await c('apply', doc);
    expect(apply.code).toBe(6);
    expect(apply.stderr).toContain(
      'version: the stored version 9007199254740992 has reached the ceiling 9007199254740991; nothing written',
    );
    const add = await c('add', 'a', '127.0.0.1:7001');
    expect(add.code).toBe(7);
    expect(add.stderr).toContain('snapshot.version: must be an integer in [0, 9007199254740991], got 9007199254740992');
    await admin.set(
      'poise:garbage:snapshot',
      '{"version":3,"document":{"cluster":"garbage","backends":[{"id":"a","address":"127.0.0.1:1","weight":-2}]}}',
    );
    const bad = await c('show');
    expect(bad.code).toBe(7);
    expect(bad.stderr).toContain('snapshot.document.backends[0].weight: must be an integer in [1, 4294967295], got -2');
    await admin.set('poise:garbage:snapshot', 'not json');
    expect((await c('show')).stderr).toContain('snapshot: malformed JSON');
  });

  it('Redis unreachable: exit 1 with the server and the reason, not ioredis internals', async () => {
    const port = await freePort();
    const r = await inProcess(['show', '--redis', `redis://127.0.0.1:${port}`, '--cluster', 'down']);
    expect(r.code).toBe(1);
    expect(r.stderr).toContain(
      `poise members show: redis redis://127.0.0.1:${port}: unavailable (connect ECONNREFUSED 127.0.0.1:${port}); nothing read`,
    );
    expect(r.stderr).not.toContain('max retries');
    const w = await inProcess(['drain', 'a', '--redis', `redis://:secret@127.0.0.1:${port}`, '--cluster', 'down']);
    expect(w.code).toBe(1);
    expect(w.stderr).toContain(
      `poise members drain: redis redis://:***@127.0.0.1:${port}: unavailable (connect ECONNREFUSED 127.0.0.1:${port}); nothing written`,
    );
    expect(w.stderr).not.toContain('secret');
  });

  it('write contention that exhausts the retries exits 5 (a conflict, not a validation failure)', async () => {
    expect((await inProcess(['add', 'a', '127.0.0.1:7001', '--redis', redis.url, '--cluster', 'contended'])).code).toBe(0);
    // Every read of the snapshot is followed at once by another writer's version: each attempt's conditional write loses.
    const get = Redis.prototype.get;
    const spy = vi.spyOn(Redis.prototype, 'get').mockImplementation(async function (this: Redis, ...args: unknown[]) {
      const text = (await (get as (...a: unknown[]) => Promise<string | null>).apply(this, args)) as string | null;
      if (text !== null) {
        const env = JSON.parse(text) as { version: number; lineage: string; document: unknown };
        await admin.set('poise:contended:snapshot', JSON.stringify({ ...env, version: env.version + 1 }));
      }
      return text;
    } as never);
    try {
      const r = await inProcess(['add', 'b', '127.0.0.1:7002', '--redis', redis.url, '--cluster', 'contended']);
      expect(r.code).toBe(5);
      expect(r.stderr).toContain('add b: gave up after 16 attempts under concurrent writes; nothing written');
    } finally {
      spy.mockRestore();
    }
  });

  it('names follow the one cluster-name rule (":" refused before connecting); documents are read with a size cap', async () => {
    const colon = await inProcess(['show', '--redis', redis.url, '--cluster', 'a:b']);
    expect(colon.code).toBe(2);
    expect(colon.stderr).toContain('--cluster: must be 1 to 128 characters of [A-Za-z0-9._-], starting with a letter or digit, got "a:b"');
    const prefix = await inProcess(['show', '--redis', redis.url, '--cluster', 'ok', '--prefix', '-p']);
    expect(prefix.code).toBe(2);
    expect(prefix.stderr).toContain('--prefix: must be 1 to 128 characters');
    const zero = await inProcess(['apply', '/dev/zero', '--redis', redis.url, '--cluster', 'ok', '--max-bytes', '4096']);
    expect(zero.code).toBe(3);
    expect(zero.stderr).toContain('document: "/dev/zero" exceeds the limit of 4096 bytes');
    const missing = await inProcess(['apply', path.join(dir, 'nope.json'), '--redis', redis.url, '--cluster', 'ok']);
    expect(missing.code).toBe(4);
    expect(missing.stderr).toContain('document: cannot read');
    const level = await runCli(['members', 'show', '--redis', redis.url, '--cluster', 'ok'], '', { POISE_LOG_LEVEL: 'loud' });
    expect(level.code).toBe(2);
    expect(level.stderr).toContain('POISE_LOG_LEVEL: must be one of fatal, error, warn, info, debug, trace, silent, got "loud"');
  });

  it('apply refuses a document without "cluster", or for another cluster, naming the document and what to do; nothing is written', async () => {
    const bare = path.join(dir, 'bare.json');
    writeFileSync(bare, JSON.stringify({ backends: [{ id: 'a', address: '127.0.0.1:7001' }] }));
    const none = await inProcess(['apply', bare, '--redis', redis.url, '--cluster', 'doc-check']);
    expect(none.code).toBe(3);
    expect(none.stderr).toBe(
      `poise members apply: ${bare}: the document has no "cluster"; add "cluster": "doc-check" to it (the cluster this command writes, from --cluster or POISE_CLUSTER)\n`,
    );
    const other = path.join(dir, 'other.json');
    writeFileSync(other, JSON.stringify({ cluster: 'api', backends: [{ id: 'a', address: '127.0.0.1:7001' }] }));
    const mismatch = await inProcess(['apply', other, '--redis', redis.url, '--cluster', 'doc-check']);
    expect(mismatch.code).toBe(3);
    expect(mismatch.stderr).toBe(
      `poise members apply: ${other}: the document is for cluster "api", not "doc-check" (--cluster or POISE_CLUSTER); apply it with --cluster api, or change its "cluster"\n`,
    );
    expect(await admin.exists('poise:doc-check:snapshot')).toBe(0);
    // The same document with its cluster named applies.
    writeFileSync(bare, JSON.stringify({ cluster: 'doc-check', backends: [{ id: 'a', address: '127.0.0.1:7001' }] }));
    expect(await inProcess(['apply', bare, '--redis', redis.url, '--cluster', 'doc-check'])).toMatchObject({ code: 0, stdout: '1\n' });
  });

  it('watch prints each applied version', async () => {
    const child = spawn(process.execPath, [CLI, 'members', 'watch', '--redis', redis.url, '--cluster', 'watched', '--count', '3'], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
    const w = (sub: string, ...rest: string[]) => poise(['members', sub, '--redis', redis.url, '--cluster', 'watched', ...rest]);
    // Whether the watcher subscribed before or after this write, it prints version 1 exactly once:
    // the notice if it was subscribed, the snapshot read otherwise.
    expect(
      await poise(
        ['members', 'apply', '-', '--redis', redis.url, '--cluster', 'watched'],
        JSON.stringify({ cluster: 'watched', backends: [] }),
      ),
    ).toMatchObject({ code: 0 });
    await until(() => out.includes('version 1 '), 'watch printing version 1');
    await w('add', 'x', '127.0.0.1:7100', '--status', 'draining');
    await w('add', 'y', '127.0.0.1:7101');
    expect(await exited).toBe(0);
    // One table per applied version (the lineage is the cluster's random one: the same in all three).
    const lineage = /lineage ([0-9a-f]{32})/.exec(out)?.[1];
    expect(lineage).toBeDefined();
    expect(out.replaceAll(lineage!, 'L')).toBe(
      [
        'cluster watched  version 1  lineage L  backends 0',
        'BACKEND  STATUS  WEIGHT  PRIORITY  LOCALITY  ADDRESS',
        '',
        'cluster watched  version 2  lineage L  backends 1',
        'BACKEND  STATUS    WEIGHT  PRIORITY  LOCALITY  ADDRESS',
        'x        draining       1         0  -         127.0.0.1:7100',
        '',
        'cluster watched  version 3  lineage L  backends 2',
        'BACKEND  STATUS    WEIGHT  PRIORITY  LOCALITY  ADDRESS',
        'x        draining       1         0  -         127.0.0.1:7100',
        'y        ready          1         0  -         127.0.0.1:7101',
        '',
        '',
      ].join('\n'),
    );
  });
});
