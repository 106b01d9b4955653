// The package as npm ships it: `npm pack` the built tree, install the tarball
// into an empty project the way a user does — `npm install` with no lockfile,
// so npm resolves every dependency range afresh from the registry (a new
// ioredis or pino release is what a user gets, not this repo's lockfile) —
// then use it from there: every entry by import and by require(), the
// `poise` binary, the declarations under strict TypeScript without
// skipLibCheck, a stack trace. The install omits optional dependencies, so
// it also proves the package works without pino-pretty. Needs the npm
// registry (or a mirror npm is configured for). `npm test` builds first
// (pretest).
//
// What ships, and why: the compiled JavaScript (dist/src/**/*.js), its
// declarations (*.d.ts), README, LICENSE and package.json — nothing else.
// No TypeScript sources and no source maps: tsc emits unbundled,
// unminified ES2022 that keeps the source's names and structure (without
// its comments: tsconfig.build.json; the declarations keep their docs),
// so a stack frame already points at a readable line of a shipped file;
// maps (with their sources inlined) would triple the package for a
// translation a reader does not need, and maps that point at files not
// shipped make bundlers and debuggers warn.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INTERNALS, SURFACE } from '../helpers/surface.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const TSC = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

interface PackageJson {
  name: string;
  version: string;
  license: string;
  bin: Record<string, string>;
  engines: Record<string, string>;
  dependencies: Record<string, string>;
  optionalDependencies: Record<string, string>;
  peerDependencies: Record<string, string>;
  peerDependenciesMeta: Record<string, unknown>;
  exports: Record<string, Record<string, string> | string>;
}

const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as PackageJson;

let work = '';
let files: string[] = [];
let project = '';
let installed = '';
/** What the consumer's `npm install` printed on stderr (npm's warnings). */
let installWarnings = '';

function npm(args: string[], cwd: string): string {
  return execFileSync('npm', args, { cwd, encoding: 'utf8', env: { ...process.env, npm_config_update_notifier: 'false' } });
}

/**
 * The consumer's dependencies: the tarball, undici (the http entry's peer)
 * in the major this repo tests on every Node it supports (7; 8 needs Node >=
 * 22.19), and @grpc/grpc-js (the grpc entry's peer) in the minor this repo
 * tests, each resolved afresh within it.
 */
function consumerDependencies(tarball: string): Record<string, string> {
  const version = (name: string) =>
    (JSON.parse(readFileSync(path.join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
  const grpc = version('@grpc/grpc-js').split('.');
  return { 'poise-lb': tarball, undici: `^${version('undici').split('.')[0]}.0.0`, '@grpc/grpc-js': `~${grpc[0]}.${grpc[1]}.0` };
}

function run(args: string[], opts: { input?: string } = {}): { status: number | null; stdout: string; stderr: string } {
  const r = spawnSync(process.execPath, args, {
    cwd: project,
    encoding: 'utf8',
    input: opts.input,
    env: { ...process.env, POISE_LOG_LEVEL: 'info' },
  });
  return { status: r.status, stdout: r.stdout, stderr: r.stderr };
}

beforeAll(() => {
  work = mkdtempSync(path.join(os.tmpdir(), 'poise-pack-'));
  // --ignore-scripts: `prepare` would rebuild dist/ under the other test files running now.
  const [packed] = JSON.parse(npm(['pack', '--ignore-scripts', '--json', '--pack-destination', work], ROOT)) as [
    { filename: string; files: { path: string }[] },
  ];
  files = packed.files.map((f) => f.path).sort();
  project = path.join(work, 'consumer');
  const tarball = `file:../${packed.filename}`;
  execFileSync('mkdir', [project]);
  writeFileSync(
    path.join(project, 'package.json'),
    JSON.stringify({ name: 'consumer', version: '0.0.0', private: true, type: 'module', dependencies: consumerDependencies(tarball) }),
  );
  // No lockfile: fresh resolution, as a user's first install. Scripts allowed, as a user's install: npm reviews the
  // install scripts of a non-registry package (this tarball).
  const install = spawnSync('npm', ['install', '--omit=optional', '--no-audit', '--no-fund'], {
    cwd: project,
    encoding: 'utf8',
    env: { ...process.env, npm_config_update_notifier: 'false' },
  });
  if (install.status !== 0) throw new Error(`npm install of the tarball failed (${install.status}): ${install.stderr}`);
  installWarnings = install.stderr;
  installed = path.join(project, 'node_modules', 'poise-lb');
}, 180_000);

afterAll(() => {
  if (work !== '') rmSync(work, { recursive: true, force: true });
});

describe('the packed package', () => {
  it('ships dist/src JavaScript with its declarations, LICENSE, README and package.json — no sources, maps, tests, benchmarks or build config', () => {
    const outside = files.filter((f) => !f.startsWith('dist/src/'));
    expect(outside).toEqual(['LICENSE', 'README.md', 'package.json']);
    const inside = files.filter((f) => f.startsWith('dist/src/'));
    const js = inside.filter((f) => f.endsWith('.js'));
    const dts = inside.filter((f) => f.endsWith('.d.ts'));
    // Exactly one module and one declaration file per TypeScript source file of src/.
    const sources = (readdirSync(path.join(ROOT, 'src'), { recursive: true }) as string[]).filter((f) => f.endsWith('.ts'));
    expect(js.map((f) => f.slice('dist/src/'.length, -'.js'.length)).sort()).toEqual(sources.map((f) => f.slice(0, -'.ts'.length)).sort());
    expect(dts.map((f) => f.replace(/\.d\.ts$/, '.js')).sort()).toEqual([...js].sort());
    expect(inside).toHaveLength(js.length + dts.length); // no .map, no .ts source, nothing else
    expect(files.length).toBeLessThanOrEqual(2 * sources.length + 3);
    expect(readFileSync(path.join(installed, 'LICENSE'), 'utf8')).toMatch(
      /^MIT License\n\nCopyright \(c\) 2026 Poise for Node contributors\n/,
    );
  });

  it('installing it runs no install script and asks npm to review none (no prepare/install hooks in the shipped package.json)', () => {
    // npm names every package whose install scripts it wants reviewed; @grpc/grpc-js's protobufjs (a postinstall) may
    // be listed, this package never.
    expect(installWarnings).not.toMatch(/poise-lb/);
    const shipped = JSON.parse(readFileSync(path.join(installed, 'package.json'), 'utf8')) as { scripts?: Record<string, string> };
    const hooks = ['preinstall', 'install', 'postinstall', 'prepublish', 'preprepare', 'prepare', 'postprepare'];
    expect(Object.keys(shipped.scripts ?? {}).filter((k) => hooks.includes(k))).toEqual([]);
  });

  it('no shipped file points at a source map (bundlers and debuggers would look for files that are not there)', () => {
    for (const f of files.filter((x) => x.endsWith('.js') || x.endsWith('.d.ts')))
      expect(readFileSync(path.join(installed, f), 'utf8'), f).not.toContain('sourceMappingURL');
  });

  it('every "exports" entry has declarations and a module that exist in the tarball; `default` (require) is the same module as `import`', () => {
    for (const [entry, target] of Object.entries(pkg.exports)) {
      if (entry === './package.json') continue;
      const t = target as Record<string, string>;
      expect(Object.keys(t)).toEqual(['types', 'import', 'default']);
      expect(t['default']).toBe(t['import']);
      for (const file of [t['types']!, t['import']!]) expect(files).toContain(file.replace(/^\.\//, ''));
    }
  });

  it.each(Object.keys(SURFACE))(
    '%s: require() from a CommonJS file gives the same run-time names where Node loads ES modules synchronously, else ERR_REQUIRE_ESM',
    (entry) => {
      const file = path.join(project, `require-${entry.replace(/\W/g, '_')}.cjs`);
      writeFileSync(file, `console.log(JSON.stringify(Object.keys(require(${JSON.stringify(entry)})).sort()));\n`);
      const r = run([file]);
      // process.features.require_module: Node >= 20.19 / 22.12 (require(esm) without a flag).
      if ((process.features as { require_module?: boolean }).require_module === true) {
        // No warning either: an ExperimentalWarning here would print on every user's start.
        expect([r.status, r.stderr]).toEqual([0, '']);
        expect(JSON.parse(r.stdout)).toEqual([...SURFACE[entry]!].sort());
      } else {
        expect(r.status).not.toBe(0);
        expect(r.stderr).toContain('ERR_REQUIRE_ESM');
      }
    },
  );

  it.each(Object.keys(SURFACE))('%s imports from the installed package with exactly its run-time names', (entry) => {
    const r = run([
      '--input-type=module',
      '-e',
      `const m = await import(${JSON.stringify(entry)}); console.log(JSON.stringify(Object.keys(m).sort()));`,
    ]);
    expect(r.stderr).toBe('');
    const names = JSON.parse(r.stdout) as string[];
    expect(names).toEqual([...SURFACE[entry]!].sort());
    for (const internal of INTERNALS) expect(names).not.toContain(internal);
  });

  it('a deep import of a module file is refused by the exports map', () => {
    const r = run(['--input-type=module', '-e', `await import('poise-lb/dist/src/core/weight.js');`]);
    expect(r.status).not.toBe(0);
    expect(r.stderr).toContain('ERR_PACKAGE_PATH_NOT_EXPORTED');
  });

  it('node_modules/.bin/poise --help, run as an executable (the npm link and the shebang), prints the usage and exits 0', () => {
    const r = spawnSync(path.join(project, 'node_modules', '.bin', 'poise'), ['--help'], { cwd: project, encoding: 'utf8' });
    expect(r.stderr).toBe('');
    expect(r.status).toBe(0);
    expect(r.stdout).toMatch(/^usage: poise <command>/);
    for (const command of ['bench', 'proxy', 'members']) expect(r.stdout).toContain(`  ${command} `);
  });

  it('without the optional pino-pretty, createLogger({ pretty: true }) writes JSON instead of crashing', () => {
    expect(existsSync(path.join(project, 'node_modules', 'pino-pretty'))).toBe(false);
    const r = run([
      '--input-type=module',
      '-e',
      `import { createLogger } from 'poise-lb/runtime'; createLogger({ pretty: true }).info({ n: 1 }, 'hello');`,
    ]);
    expect(r.status).toBe(0);
    const line = JSON.parse(r.stderr.trim()) as Record<string, unknown>;
    expect(line).toMatchObject({ level: 30, name: 'poise', n: 1, msg: 'hello' });
  });

  it('a stack trace through the package points at the shipped JavaScript line that threw (readable without maps)', () => {
    const r = run([
      '--input-type=module',
      '-e',
      `import { PowerOfTwo } from 'poise-lb'; try { new PowerOfTwo({ sed: 1 }); } catch (e) { console.log(e.stack); }`,
    ]);
    expect(r.stdout).toContain('PoiseError: options.sed: unknown option (accepted: seed, latencyRatio)');
    const frame = /node_modules\/poise-lb\/(dist\/src\/core\/errors\.js):(\d+):\d+/.exec(r.stdout);
    expect(frame, r.stdout).not.toBeNull();
    const line = readFileSync(path.join(installed, frame![1]!), 'utf8').split('\n')[Number(frame![2]) - 1]!;
    expect(line).toMatch(/throw new PoiseError\('InvalidConfig', `\$\{field\}: \$\{reason\}\$\{suffix\}`/);
  });

  it('the declarations type-check a consumer (NodeNext, skipLibCheck off): public names resolve, internals and writers do not', () => {
    const consumer = `
import { Backend, PowerOfTwo, PoiseError, Prioritized, PriorityWeightedRandom, holdbackCeilings, type PriorityPlan, type Status } from 'poise-lb';
import { AdmissionGate, Balancer, LoadTable, Router, createLogger, type AdmissionStats, type BackendSpec, type LoadTableView, type ResolvedBackendSpec, type RouterAttachment } from 'poise-lb/runtime';
import { MembershipPublisher, RedisMembership, type RedisMembershipOptions } from 'poise-lb/redis';
import { TcpProxy, connect, type ConnectOptions } from 'poise-lb/net';
import { HttpCounters, PoiseDispatcher, RatioRetryBudget, type PoiseDispatcherOptions, type RetryBudget } from 'poise-lb/http';
import { collectMetrics, MetricsServer } from 'poise-lb/metrics';
import type { RedisClientOptions } from 'poise-lb/redis';
import { fetch } from 'undici';
// @ts-expect-error internal arithmetic is not exported
import { checkedAdd } from 'poise-lb';
// @ts-expect-error the shared clock is not exported
import { sharedClock } from 'poise-lb/runtime';
// @ts-expect-error the generator is internal (the bench's kit)
import { Rng } from 'poise-lb';
// @ts-expect-error the CLI's flag parser is not an entry
import { parseFlags } from 'poise-lb/cli';

const status: Status = 'ready';
const pick: number = new PowerOfTwo({ seed: 1 }).pick([new Backend('a', { status }), new Backend('b')]);
const plan: PriorityPlan = new PriorityWeightedRandom({ seed: 1 }).plan([new Prioritized(new Backend('a'), 0)]);
const ceilings: number[] = holdbackCeilings([2, 1], { minCeiling: 0.5 });
const balancer = new Balancer({ logger: createLogger({ level: 'silent' }) });
const view: LoadTableView = balancer.table;
const stats: { requests: number } = view.stats(0);
const attachment: RouterAttachment = balancer.attachment();
const router: Router = Router.attach(attachment);
const reads: number = LoadTable.attach(attachment.buffer).requests(0);
const admission: AdmissionStats = new AdmissionGate(router, { bands: [1, 0], minCeiling: 0.5 }).admissionStats();
const queued: Promise<unknown> = router.acquireAsync({ band: 1, timeoutMs: 10 });
// @ts-expect-error the gate's attachment point is internal
router.attachAdmission;
// @ts-expect-error the view has no writers
balancer.table.tags.setTag(0, 1, 1);
// @ts-expect-error the table's writers are internal
LoadTable.attach(attachment.buffer).leases.up(0, 0, 0);
// @ts-expect-error the owner-side table is internal
balancer.ownerTable;
// @ts-expect-error attachment() is the RouterAttachment, not a wrapper
balancer.attachment().transferList;
const options: RedisMembershipOptions | undefined = undefined;
// redisOptions: ioredis's options without ioredis's declarations (typed fields checked, the rest passed through).
const redisOptions: RedisClientOptions = { tls: { servername: 'redis.internal' }, retryStrategy: (times) => 100 * times, sentinelPassword: 's' };
// @ts-expect-error a typed field keeps its type
const badRedisOptions: RedisClientOptions = { connectTimeout: '3s' };
const scrape = (b: Balancer): MetricsServer => new MetricsServer({ registry: collectMetrics(b, { http: HttpCounters.create({ capacity: 8 }) }).registry });
const connectOptions: ConnectOptions = {};
const budget: RetryBudget = new RatioRetryBudget({ ratio: 0.1 });
const dispatcherOptions: PoiseDispatcherOptions = { router, origin: 'http://api', retryBudget: budget, counters: HttpCounters.create({ capacity: 8 }) };
const dispatcher = new PoiseDispatcher(dispatcherOptions);
const response: Promise<Response | unknown> = fetch('http://api/x', { dispatcher });
// @ts-expect-error the router's membership read for the dispatcher is internal
router.member('a');
// The spec types are mapped from the field table: required and optional fields, the status union, every field resolved.
const spec: BackendSpec = { id: 'a', address: '127.0.0.1:1', weight: 2, status: 'degraded', panicEligible: false };
// @ts-expect-error a misspelt field is not a BackendSpec field
const typo: BackendSpec = { id: 'a', address: '127.0.0.1:1', wieght: 2 };
// @ts-expect-error address is required
const noAddress: BackendSpec = { id: 'a' };
// @ts-expect-error status is one of the four statuses
const badStatus: BackendSpec = { id: 'a', address: '127.0.0.1:1', status: 'up' };
const resolved: ResolvedBackendSpec = { ...spec, priority: 0, locality: '', localityWeight: 1, maxInflight: 0, weight: 1, status: 'ready', panicEligible: true, role: 'none', hostname: '', fallbackIp: '' };
// @ts-expect-error a resolved spec has every field
const partial: ResolvedBackendSpec = { id: 'a', address: '127.0.0.1:1' };
export { spec, typo, noAddress, badStatus, resolved, partial };
export { redisOptions, badRedisOptions, scrape };
export { pick, plan, ceilings, stats, router, reads, admission, queued, options, connectOptions, response, PoiseError, MembershipPublisher, RedisMembership, TcpProxy, connect, checkedAdd, sharedClock, Rng, parseFlags };
`;
    writeFileSync(path.join(project, 'consumer.ts'), consumer);
    writeFileSync(
      path.join(project, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          module: 'NodeNext',
          moduleResolution: 'NodeNext',
          target: 'ES2022',
          lib: ['ES2023', 'ES2024.SharedMemory'],
          strict: true,
          noEmit: true,
          skipLibCheck: false,
          types: ['node'],
          typeRoots: [path.join(ROOT, 'node_modules', '@types')],
        },
        files: ['consumer.ts'],
      }),
    );
    const r = spawnSync(process.execPath, [TSC, '-p', project], { cwd: project, encoding: 'utf8' });
    expect(r.stdout + r.stderr).toBe('');
    expect(r.status).toBe(0);
  });
});
