// The package's entries, as a user imports them (the package name resolves
// through package.json "exports" to the compiled dist/, so `npm run build`
// must have run — `npm test` does). Each import runs in a fresh process under
// test/fixtures/load-probe.mjs, which reports every node_modules package the
// import loaded, seen both by a module resolve hook and in the CommonJS cache.
import { execFileSync, spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { Backend } from '../../src/core/candidate.js';
import { PowerOfTwo } from '../../src/policy/power-of-two.js';
import { INTERNALS, SURFACE } from '../helpers/surface.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const PROBE = path.join(ROOT, 'test', 'fixtures', 'load-probe.mjs');

interface Probe {
  packages: string[];
  resolved: number;
  exports: string[];
  result: unknown;
}

function probe(specifier: string, snippet?: string): Probe {
  const args = [PROBE, specifier, ...(snippet === undefined ? [] : [snippet])];
  // cwd = the package root: `poise-lb` resolves to this package by its own name (self-reference).
  const out = execFileSync(process.execPath, args, { cwd: ROOT, encoding: 'utf8', env: { ...process.env, POISE_LOG_LEVEL: 'silent' } });
  return JSON.parse(out) as Probe;
}

/** The I/O dependencies the root entry must never load. */
const IO_DEPENDENCIES = ['ioredis', 'piscina', 'pino', 'pino-pretty', 'yaml', 'prom-client'];

describe('package entries', () => {
  it('importing PowerOfTwo from the root loads no package at all (so none of ioredis, piscina, pino, yaml, prom-client), and it picks as the source does', () => {
    const seed = 7;
    const snippet = `const p = new m.PowerOfTwo({ seed: ${seed} }); const bs = [0, 1, 2, 3].map((i) => new m.Backend('b' + i, { load: () => i })); return Array.from({ length: 64 }, () => p.pick(bs));`;
    const r = probe('poise-lb', snippet);
    // The witnesses were live: the root's own graph (core, policy, load, admission) was resolved through the hook.
    expect(r.resolved).toBeGreaterThan(20);
    expect(r.packages).toEqual([]);
    for (const dep of IO_DEPENDENCIES) expect(r.packages).not.toContain(dep);
    const p = new PowerOfTwo({ seed });
    const bs = [0, 1, 2, 3].map((i) => new Backend(`b${i}`, { load: () => i }));
    expect(r.result).toEqual(Array.from({ length: 64 }, () => p.pick(bs)));
  });

  it('the probe sees dependencies when they load: poise-lb/runtime loads pino and piscina, yaml only with the first YAML document, and never ioredis', () => {
    const r = probe('poise-lb/runtime');
    for (const dep of ['pino', 'piscina']) expect(r.packages).toContain(dep);
    for (const dep of ['yaml', 'ioredis']) expect(r.packages).not.toContain(dep);
    // A YAML membership file read through the public API: now yaml is loaded (and parsed it).
    const yamlFile = [
      'return (async () => {',
      "const fs = process.getBuiltinModule('node:fs'), os = process.getBuiltinModule('node:os'), path = process.getBuiltinModule('node:path');",
      "const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'poise-yaml-')); const file = path.join(dir, 'members.yaml');",
      "fs.writeFileSync(file, ['cluster: c', 'backends:', '  - id: a', '    address: 127.0.0.1:7001', ''].join(String.fromCharCode(10)));",
      'const ids = []; const source = new m.StaticMembership({ file }, { watch: false });',
      'await source.start((snapshot) => { for (const b of snapshot.backends) ids.push(b.id); });',
      'fs.rmSync(dir, { recursive: true, force: true }); return ids;',
      '})();',
    ].join(' ');
    const y = probe('poise-lb/runtime', yamlFile);
    expect(y.result).toEqual(['a']);
    expect(y.packages).toContain('yaml');
  });

  it("no entry but poise-lb/http loads Node's bundled undici (an ESM import of node:http does on Node 24: +18 MB of RSS per thread)", () => {
    const snippet = "return process.moduleLoadList.filter((l) => l.includes('internal/deps/undici')).length;";
    for (const entry of ['poise-lb', 'poise-lb/runtime', 'poise-lb/net', 'poise-lb/metrics', 'poise-lb/redis']) {
      expect(probe(entry, snippet).result, entry).toBe(0);
    }
    // The witness is live where Node has the lazy getters: an ESM import of node:http loads it there.
    const major = Number(process.versions.node.split('.')[0]);
    const direct = spawnSync(
      process.execPath,
      [
        '--input-type=module',
        '-e',
        "await import('node:http'); console.log(process.moduleLoadList.filter((l) => l.includes('internal/deps/undici')).length);",
      ],
      { encoding: 'utf8' },
    );
    if (major >= 24) expect(Number(direct.stdout.trim())).toBe(1);
  });

  it('only poise-lb/redis loads ioredis; poise-lb/net loads neither ioredis, piscina nor yaml', () => {
    expect(probe('poise-lb/redis').packages).toContain('ioredis');
    const net = probe('poise-lb/net').packages;
    for (const dep of ['ioredis', 'piscina', 'yaml', 'prom-client']) expect(net).not.toContain(dep);
    // poise-lb/drivers takes the caller's ioredis and mysql2 objects: it loads neither.
    const drivers = probe('poise-lb/drivers').packages;
    for (const dep of ['ioredis', 'mysql2', 'piscina', 'yaml', 'prom-client']) expect(drivers).not.toContain(dep);
  });

  it('only poise-lb/metrics loads prom-client, and it loads no ioredis', () => {
    const metrics = probe('poise-lb/metrics').packages;
    expect(metrics).toContain('prom-client');
    expect(metrics).not.toContain('ioredis');
    for (const entry of ['poise-lb', 'poise-lb/runtime', 'poise-lb/redis']) expect(probe(entry).packages).not.toContain('prom-client');
  });

  it('only poise-lb/http loads undici (a peer dependency, optional for every other entry), and nothing else', () => {
    expect(probe('poise-lb/http').packages).toEqual(['undici']);
    for (const entry of Object.keys(SURFACE).filter((e) => e !== 'poise-lb/http')) expect(probe(entry).packages).not.toContain('undici');
  });

  it('only poise-lb/grpc loads @grpc/grpc-js (a peer dependency, optional for every other entry)', () => {
    expect(probe('poise-lb/grpc').packages).toContain('@grpc/grpc-js');
    for (const entry of Object.keys(SURFACE).filter((e) => e !== 'poise-lb/grpc'))
      expect(probe(entry).packages).not.toContain('@grpc/grpc-js');
  });

  it.each(Object.keys(SURFACE))('%s exports exactly its documented run-time names, and no internal', (entry) => {
    const names = probe(entry).exports;
    expect(names).toEqual([...SURFACE[entry]!].sort());
    for (const internal of INTERNALS) expect(names).not.toContain(internal);
  });

  it('poise-lb/cli (the flag parser and exit table the bench package uses) is not an entry: Node refuses it, as it refuses a deep path', () => {
    for (const specifier of ['poise-lb/cli', 'poise-lb/dist/src/bench-kit.js']) {
      const r = spawnSync(process.execPath, ['--input-type=module', '-e', `await import(${JSON.stringify(specifier)});`], {
        cwd: ROOT,
        encoding: 'utf8',
      });
      expect(r.status, specifier).toBe(1);
      expect(r.stderr).toContain('ERR_PACKAGE_PATH_NOT_EXPORTED');
    }
  });

  it('package.json maps every entry to its compiled module and its declarations, and exports nothing else', () => {
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { exports: Record<string, unknown> };
    const entries = Object.keys(SURFACE).map((e) => (e === 'poise-lb' ? '.' : `./${e.slice('poise-lb/'.length)}`));
    expect(Object.keys(pkg.exports).sort()).toEqual([...entries, './package.json'].sort());
    for (const e of entries) {
      const base = e === '.' ? 'index' : e.slice(2);
      // "types" first: TypeScript takes the first condition that matches; `default` (require of the ESM build) is the same module.
      expect(Object.entries(pkg.exports[e] as Record<string, string>)).toEqual([
        ['types', `./dist/src/${base}.d.ts`],
        ['import', `./dist/src/${base}.js`],
        ['default', `./dist/src/${base}.js`],
      ]);
    }
  });
});
