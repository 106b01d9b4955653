import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { MembershipSnapshot } from '../../src/core/spec.js';
import { StaticMembership } from '../../src/membership/static.js';
import { bindMembership } from '../../src/membership/source.js';
import { captureLog } from '../helpers/log-capture.js';
import { until } from '../helpers/until.js';
import { rejection } from '../helpers/thrown.js';

const quiet = () => captureLog().logger;
const dirs: string[] = [];
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});
function tmpFile(name: string, text: string): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'poise-static-'));
  dirs.push(dir);
  const file = path.join(dir, name);
  writeFileSync(file, text);
  return file;
}
const doc = (ids: string[], extra: Record<string, unknown> = {}): string =>
  JSON.stringify({ cluster: 'db', ...extra, backends: ids.map((id, i) => ({ id, address: `127.0.0.1:${7000 + i}` })) });

describe('StaticMembership (in memory)', () => {
  it('delivers the array, then set() bumps the version; a bad set keeps the last good', async () => {
    const seen: MembershipSnapshot[] = [];
    const src = new StaticMembership({ backends: [{ id: 'a', address: '127.0.0.1:1' }], cluster: 'db' }, { logger: quiet() });
    await src.start((s) => seen.push(s));
    expect(seen.map((s) => s.version)).toEqual([1]);
    expect(src.set([{ id: 'b', address: '127.0.0.1:2' }])).toBe(2);
    expect(() => src.set([{ id: 'c', address: '127.0.0.1:3', weight: -2 }])).toThrow(
      'backends[0].weight: must be an integer in [1, 4294967295], got -2',
    );
    expect(() => src.set([{ id: 'c', address: '127.0.0.1:3' }], 2)).toThrow('version: must be greater than the version in force 2, got 2');
    expect(src.version).toBe(2);
    expect(seen.map((s) => s.backends.map((b) => b.id))).toEqual([['a'], ['b']]);
    await src.close();
  });

  it('rejects bad options naming the option', () => {
    expect(() => new StaticMembership({ file: '' })).toThrow('input.file: must be a non-empty path, got ""');
    expect(() => new StaticMembership({ backends: [], cluster: 'x y' })).toThrow('input.cluster: must be 1 to 128 characters');
    expect(() => new StaticMembership({ file: 'a.json' }, { debounceMs: -1 })).toThrow(
      'options.debounceMs: must be an integer in [0, 60000], got -1',
    );
  });

  it('feeds a target through bindMembership', async () => {
    const versions: number[] = [];
    const target = { update: (s: MembershipSnapshot) => (versions.push(s.version), s.version) };
    const binding = await bindMembership(
      new StaticMembership({ backends: [{ id: 'a', address: '127.0.0.1:1' }], version: 7 }, { logger: quiet() }),
      target,
      { logger: quiet() },
    );
    expect(binding.version).toBe(7);
    expect(versions).toEqual([7]);
    await binding.close();
  });
});

describe('StaticMembership (file)', () => {
  it('rejects an invalid initial file with the field and the reason', async () => {
    const file = tmpFile('m.json', JSON.stringify({ cluster: 'db', backends: [{ id: 'a', address: '127.0.0.1:1', weight: -2 }] }));
    const src = new StaticMembership({ file }, { watch: false, logger: quiet() });
    await expect(src.start(() => {})).rejects.toThrow('backends[0].weight: must be an integer in [1, 4294967295], got -2');
  });

  it('reads YAML by extension', async () => {
    const file = tmpFile('m.yaml', 'cluster: db\nversion: 5\nbackends:\n  - { id: a, address: "127.0.0.1:1", status: draining }\n');
    const seen: MembershipSnapshot[] = [];
    const src = new StaticMembership({ file }, { watch: false, logger: quiet() });
    await src.start((s) => seen.push(s));
    expect(seen[0]).toMatchObject({ version: 5, cluster: 'db' });
    expect(seen[0]!.backends[0]!.status).toBe('draining');
  });

  it('re-validates on every change, keeps the last good, survives rename-replace', async () => {
    const file = tmpFile('members.json', doc(['a']));
    const log = captureLog();
    const seen: MembershipSnapshot[] = [];
    const src = new StaticMembership({ file }, { debounceMs: 20, logger: log.logger });
    await src.start((s) => seen.push(s));
    expect(src.version).toBe(1);

    // 1. In-place write.
    writeFileSync(file, doc(['a', 'b']));
    await until(() => src.version === 2, 'version 2 from an in-place write');

    // 2. Invalid change: logged, nothing applied.
    writeFileSync(
      file,
      JSON.stringify({
        cluster: 'db',
        backends: [
          { id: 'a', address: '127.0.0.1:1' },
          { id: 'a', address: '127.0.0.1:2' },
        ],
      }),
    );
    await until(() => log.find('change rejected').length > 0, 'the rejection log line');
    expect(log.find('change rejected')[0]!['err']).toBe('backends[1].id: duplicate id "a" (first at backends[0])');
    expect(src.version).toBe(2);

    // 3. Editor-style save: write a temp file and rename it over the original (new inode).
    const tmp = `${file}.swp`;
    writeFileSync(tmp, doc(['a', 'b', 'c']));
    renameSync(tmp, file);
    await until(() => src.version === 3, 'version 3 after rename-replace');

    // 4. And again: the watch survived the inode change.
    writeFileSync(tmp, doc(['c']));
    renameSync(tmp, file);
    await until(() => src.version === 4, 'version 4 after a second rename-replace');

    // 5. An explicit version that goes backwards is rejected.
    writeFileSync(file, doc(['z'], { version: 2 }));
    await until(() => log.find('change rejected').length > 1, 'the second rejection');
    expect(log.find('change rejected')[1]).toMatchObject({
      err: 'version: 2 is not newer than the version in force 4',
      code: 'Conflict',
      field: 'version',
    });

    expect(seen.map((s) => s.backends.map((b) => b.id))).toEqual([['a'], ['a', 'b'], ['a', 'b', 'c'], ['c']]);
    await src.close();
  });

  it('a listener that throws rejects the snapshot and the version does not move', async () => {
    const file = tmpFile('m.json', doc(['a']));
    const log = captureLog();
    let refuse = false;
    const src = new StaticMembership({ file }, { watch: false, logger: log.logger });
    await src.start(() => {
      if (refuse) throw new Error('target refused');
    });
    refuse = true;
    writeFileSync(file, doc(['b']));
    expect(await src.reload()).toBe(1);
    expect(log.find('change rejected')[0]!['err']).toBe('target refused');
    refuse = false;
    expect(await src.reload()).toBe(2);
  });

  it('reads through a size cap: /dev/zero is "exceeds N bytes", not a crash', async () => {
    const src = new StaticMembership({ file: '/dev/zero' }, { watch: false, maxBytes: 1024, logger: quiet() });
    const err = await rejection(src.start(() => {}));
    expect([err.code, err.field, err.message]).toEqual([
      'InvalidConfig',
      'input.file',
      'input.file: "/dev/zero" exceeds the limit of 1024 bytes',
    ]);
    const big = tmpFile('big.json', `${doc(['a'])}${' '.repeat(2000)}`);
    const capped = new StaticMembership({ file: big }, { watch: false, maxBytes: 1024, logger: quiet() });
    await expect(capped.start(() => {})).rejects.toThrow(`input.file: ${JSON.stringify(big)} exceeds the limit of 1024 bytes`);
  });

  it("initial: 'wait' starts without a membership, reports why, and delivers the first valid version of the file", async () => {
    const file = tmpFile('later.json', '{"cluster": "db", "backends": [');
    const log = captureLog();
    const seen: MembershipSnapshot[] = [];
    const src = new StaticMembership({ file }, { debounceMs: 10, initial: 'wait', logger: log.logger });
    await src.start((s) => seen.push(s));
    expect(seen).toHaveLength(0);
    expect(src.problem?.code).toBe('InvalidConfig');
    expect(src.problem?.message).toMatch(/^document: malformed JSON/);
    expect(log.find('missing or invalid at start; waiting')).toHaveLength(1);
    writeFileSync(file, doc(['a'], { version: 4 }));
    await until(() => src.version === 4, 'the first valid version');
    expect(src.problem).toBeUndefined();
    expect(seen.map((s) => [s.version, s.backends.map((b) => b.id)])).toEqual([[4, ['a']]]);
    await src.close();

    // A missing file waits too (NotFound), and appears later.
    const dir = path.dirname(file);
    const absent = path.join(dir, 'absent.json');
    const src2 = new StaticMembership({ file: absent }, { debounceMs: 10, initial: 'wait', logger: quiet() });
    await src2.start(() => {});
    expect(src2.problem?.code).toBe('NotFound');
    writeFileSync(absent, doc(['b']));
    await until(() => src2.version === 1, 'the file appearing');
    await src2.close();
  });
});

describe('StaticMembership input', () => {
  it('StaticMembership rejects a missing file with a NotFound PoiseError naming input.file', async () => {
    const source = new StaticMembership({ file: '/nonexistent/poise-members.json' });
    const err = await rejection(source.start(() => {}));
    expect(err.code).toBe('NotFound');
    expect(err.field).toBe('input.file');
    expect(err.message).toMatch(/^input\.file: cannot read "\/nonexistent\/poise-members\.json": ENOENT/);
    await source.close();
  });
});
