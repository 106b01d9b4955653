import { execFileSync } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { beforeAll, describe, expect, it } from 'vitest';
import { Backend } from '../../../src/core/candidate.js';
import { Maglev } from '../../../src/policy/maglev.js';
import { Rendezvous } from '../../../src/policy/rendezvous.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const DIST_INDEX = path.join(ROOT, 'dist', 'src', 'index.js');
const SOURCES = ['src/policy/maglev.ts', 'src/policy/rendezvous.ts', 'src/policy/keyed.ts', 'src/core/hash.ts'];

/** `npm test` builds first (pretest); a bare `vitest run` rebuilds when dist is missing or older than these sources. */
function ensureBuilt(): void {
  const built = existsSync(DIST_INDEX)
    ? (statSync(path.join(ROOT, 'dist', 'src', 'policy', 'maglev.js'), { throwIfNoEntry: false })?.mtimeMs ?? 0)
    : 0;
  const newest = Math.max(...SOURCES.map((f) => statSync(path.join(ROOT, f)).mtimeMs));
  if (built < newest) {
    try {
      execFileSync('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: ROOT, stdio: 'pipe' });
    } catch {
      // tsc exits non-zero on type errors elsewhere but still emits; the import below is the real check.
    }
  }
}

const IDS = ['api-3', 'api-1', 'api-7', 'api-2', 'api-9', 'api-4'];
const WEIGHTS = [1, 3, 2, 1, 5, 2];
const KEYS = Array.from({ length: 3000 }, (_, i) => (i % 3 === 0 ? i : `session-${i}`));

/** Runs in a separate `node` process on the built package; the slice is in a different order there. */
const CHILD = `
import { Backend, Maglev, Rendezvous } from ${JSON.stringify(pathToFileURL(DIST_INDEX).href)};
const ids = ${JSON.stringify(IDS)}, weights = ${JSON.stringify(WEIGHTS)}, keys = ${JSON.stringify(KEYS)};
const slice = ids.map((id, i) => new Backend(id, { weight: weights[i] })).reverse();
const hrw = new Rendezvous(), maglev = new Maglev({ tableSize: 4099 });
process.stdout.write(JSON.stringify({
  rendezvous: keys.map((key) => slice[hrw.pick(slice, { key })].id),
  maglev: keys.map((key) => slice[maglev.pick(slice, { key })].id),
}));
`;

describe('keyed policies agree across processes', () => {
  beforeAll(ensureBuilt, 120_000);

  it('Rendezvous and Maglev map every key to the same backend in another node process', () => {
    const child = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', CHILD], { encoding: 'utf8' })) as {
      rendezvous: string[];
      maglev: string[];
    };
    const slice = IDS.map((id, i) => new Backend(id, { weight: WEIGHTS[i]! }));
    const hrw = new Rendezvous();
    const maglev = new Maglev({ tableSize: 4099 });
    expect(child.rendezvous).toEqual(KEYS.map((key) => slice[hrw.pick(slice, { key })]!.id));
    expect(child.maglev).toEqual(KEYS.map((key) => slice[maglev.pick(slice, { key })]!.id));
    expect(new Set(child.maglev).size).toBe(IDS.length);
  });
});
