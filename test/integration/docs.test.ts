/**
 * The documentation's code is checked like code: every ```ts and ```js block
 * of README.md and docs/*.md is compiled against the built package (its
 * public entries, as a user imports them) with the project's strict options,
 * every ```js block must also be JavaScript as written (a user pastes it into
 * an .mjs file: no TypeScript syntax), README's blocks are all ```js, and the
 * README's tables are compared with the names the code exports. Every README
 * block, and every block of docs/*.md marked `<!-- example: runs -->`, also
 * runs in a child process (see "examples run" below).
 *
 * A block is its own module. A block preceded by `<!-- example: continues -->`
 * is appended to the block before it (so a page can build one example in steps).
 * A block preceded by `<!-- example: file NAME -->` is a module the block
 * before it loads (a worker's task file): it is written beside it as NAME.
 * Free names an example of docs/*.md leaves to the reader (`callBackend`,
 * ...) are declared in PRELUDE below, with their types, so the rest is
 * checked; README blocks define everything they call (running them proves it).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MembershipPublisher } from '../../src/membership/redis-publisher.js';
import { createLogger } from '../../src/log.js';
import pg from 'pg';
import { startPgReplica, startPostgres } from '../helpers/db-servers.js';
import { freePort } from '../helpers/ports.js';
import { until } from '../helpers/until.js';
import { startRedis, type TestRedis } from '../helpers/redis-server.js';
import { POLICY_NAMES } from '../../src/runtime/policies.js';
import { EXIT } from '../../src/cli/exit.js';
import { POISE_ERROR_CODES } from '../../src/core/errors.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..');
const PAGES = [
  'README.md',
  ...readdirSync(path.join(ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

const PRELUDE = `
import type { Socket } from 'node:net';
declare global {
  function callBackend(host: string, port: number): Promise<void>;
  function fetchFrom(host: string, port: number, path: string): Promise<string>;
  function runBatchJob(socket: Socket): Promise<void>;
}
export {};
`;

interface Example {
  readonly page: string;
  readonly line: number;
  text: string;
  /** The fence's language: `ts` (TypeScript) or `js` (JavaScript as written). */
  readonly lang: 'ts' | 'js';
  /** Set for a `<!-- example: file NAME -->` block: the file name the block before it loads it by. */
  readonly file?: string;
  /** Set for a block of docs/*.md marked `<!-- example: runs -->` (every README block runs). */
  readonly runs?: true;
}

/** The ```ts and ```js blocks of one page, continuations joined. */
function examples(page: string): Example[] {
  const lines = readFileSync(path.join(ROOT, page), 'utf8').split('\n');
  const out: Example[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(ts|typescript|js|javascript)\s*$/.exec(lines[i]!);
    if (!open) {
      if (/^```/.test(lines[i]!)) {
        // Skip any other fenced block whole, so a ``` inside it is not taken for an opening.
        for (i++; i < lines.length && !/^```\s*$/.test(lines[i]!); i++);
      }
      continue;
    }
    const start = i + 1;
    const body: string[] = [];
    for (i++; i < lines.length && !/^```\s*$/.test(lines[i]!); i++) body.push(lines[i]!);
    const marker = lines
      .slice(0, start - 1)
      .reverse()
      .find((l) => l.trim() !== '');
    const file = /^<!-- example: file (\S+) -->$/.exec(marker ?? '')?.[1];
    const previous = out[out.length - 1];
    const lang = open[1]!.startsWith('t') ? 'ts' : 'js';
    const runs = marker === '<!-- example: runs -->' ? { runs: true as const } : {};
    if (marker === '<!-- example: continues -->' && previous) previous.text += `\n${body.join('\n')}`;
    else out.push({ page, line: start, text: body.join('\n'), lang, ...(file === undefined ? {} : { file }), ...runs });
  }
  return out;
}

const all = PAGES.flatMap(examples);
const dir = mkdtempSync(path.join(os.tmpdir(), 'poise-doc-examples-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('documentation examples', () => {
  it('exist on the pages that teach the API', () => {
    const pages = new Set(all.map((e) => e.page));
    for (const p of ['README.md', 'docs/guide.md', 'docs/membership.md', 'docs/priority.md']) expect(pages).toContain(p);
  });

  it('type-check against the built entries with the strict project options (every block of every page)', () => {
    // node_modules/poise-lb links to this repository, so `poise-lb/runtime` resolves through package.json exports.
    symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
    mkdirSync(path.join(dir, 'src'));
    writeFileSync(path.join(dir, 'src', 'prelude.mts'), PRELUDE);
    const files = all.map((e, k) => {
      const file = path.join(dir, 'src', `${e.page.replace(/[/.]/g, '_')}_${e.line}_${k}.mts`);
      // An example with no import or export is a script: make it a module so top-level await is allowed.
      writeFileSync(file, `${e.text}\nexport {};\n`);
      return file;
    });
    const program = ts.createProgram([path.join(dir, 'src', 'prelude.mts'), ...files], {
      target: ts.ScriptTarget.ES2022,
      lib: ['lib.es2023.d.ts', 'lib.es2024.sharedmemory.d.ts'],
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      strict: true,
      noUncheckedIndexedAccess: true,
      skipLibCheck: true,
      esModuleInterop: true,
      types: ['node'],
      noEmit: true,
    });
    const where = new Map(files.map((f, k) => [f, all[k]!]));
    const problems = ts.getPreEmitDiagnostics(program).map((d) => {
      const message = ts.flattenDiagnosticMessageText(d.messageText, '\n');
      if (!d.file || d.start === undefined) return message;
      const e = where.get(path.resolve(d.file.fileName));
      const { line } = d.file.getLineAndCharacterOfPosition(d.start);
      return e ? `${e.page}: the block at line ${e.line}, its line ${line + 1}: ${message}` : `${d.file.fileName}: ${message}`;
    });
    expect(problems).toEqual([]);
    expect(files.length).toBeGreaterThanOrEqual(15);
  });

  it('every ```js block is JavaScript as written (no TypeScript syntax: it runs pasted into an .mjs file), and README.md has only ```js blocks', () => {
    const js = all.filter((e) => e.lang === 'js');
    expect(all.filter((e) => e.page === 'README.md' && e.lang !== 'js').map((e) => `README.md line ${e.line}`)).toEqual([]);
    const files = js.map((e, k) => {
      const file = path.join(dir, 'js', `${e.page.replace(/[/.]/g, '_')}_${e.line}_${k}.mjs`);
      mkdirSync(path.dirname(file), { recursive: true });
      writeFileSync(file, e.text);
      return file;
    });
    const program = ts.createProgram(files, {
      allowJs: true,
      checkJs: false,
      noEmit: true,
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
    });
    const problems = files.flatMap((f, k) =>
      program.getSyntacticDiagnostics(program.getSourceFile(f)).map((d) => {
        const { line } = d.file!.getLineAndCharacterOfPosition(d.start!);
        return `${js[k]!.page}: the block at line ${js[k]!.line}, its line ${line + 1}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
      }),
    );
    expect(problems).toEqual([]);
    expect(files.length).toBeGreaterThanOrEqual(6);
  });
});

describe('documentation tables', () => {
  /** The first column of the table under `heading` on `page`, backticks removed. */
  function firstColumn(page: string, heading: string): string[] {
    const text = readFileSync(path.join(ROOT, page), 'utf8');
    const at = text.indexOf(`\n${heading}\n`);
    expect(at, `${page} has a "${heading}" section`).toBeGreaterThan(-1);
    const rows = text.slice(at).split('\n').slice(1);
    const table = rows.slice(rows.findIndex((l) => l.startsWith('|')));
    const body = table.slice(
      2,
      table.findIndex((l) => !l.startsWith('|')),
    );
    return body.map((l) =>
      l
        .split('|')[1]!
        .trim()
        .replace(/`/g, '')
        .replace(/ \(default\)$/, ''),
    );
  }

  it("docs/policies.md's table lists every runtime policy name, once, in the order of POLICY_NAMES, and so does README's sentence", () => {
    expect(firstColumn('docs/policies.md', '## Every policy by name')).toEqual([...POLICY_NAMES]);
    const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
    const sentence = readme.slice(readme.indexOf('`balancer.router({ policy })` takes one of'), readme.indexOf('([what each does]'));
    expect([...sentence.matchAll(/`([a-z][\w:-]*)`/g)].map((m) => m[1])).toEqual([...POLICY_NAMES]);
  });

  it("docs/cli.md's exit-code table lists every exit code of the CLI table, then 130 (bench interrupted)", () => {
    const codes = [...new Set(Object.values(EXIT))].sort((a, b) => a - b).map(String);
    expect(firstColumn('docs/cli.md', '## Exit codes')).toEqual([...codes, '130']);
  });

  it("docs/errors.md's table lists every PoiseError code, once", () => {
    const listed = firstColumn('docs/errors.md', '## Codes');
    expect(new Set(listed).size).toBe(listed.length);
    expect([...listed].sort()).toEqual([...POISE_ERROR_CODES].sort());
  });
});

describe('documentation links', () => {
  /** GitHub's heading anchor: lower case, punctuation dropped, spaces to hyphens. */
  const slug = (heading: string): string =>
    heading
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
  const anchors = (page: string): Set<string> => {
    const text = readFileSync(path.join(ROOT, page), 'utf8').replace(/^```[\s\S]*?^```/gm, '');
    return new Set([...text.matchAll(/^#+ (.+)$/gm)].map((m) => slug(m[1]!)));
  };

  it('every relative link of every page names a file that exists and a heading that exists', () => {
    const broken: string[] = [];
    for (const page of PAGES) {
      const text = readFileSync(path.join(ROOT, page), 'utf8').replace(/^```[\s\S]*?^```/gm, '');
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z]+:/.test(target!)) continue;
        const [file, anchor] = target!.split('#') as [string, string | undefined];
        const resolved = file === '' ? page : path.posix.normalize(path.posix.join(path.posix.dirname(page), file));
        let ok = true;
        try {
          readFileSync(path.join(ROOT, resolved));
        } catch {
          ok = false;
        }
        if (ok && anchor !== undefined) ok = anchors(resolved).has(anchor);
        if (!ok) broken.push(`${page}: ${target}`);
      }
    }
    expect(broken).toEqual([]);
  });
});

/**
 * Every README block (and every docs block marked `<!-- example: runs -->`)
 * runs, each in a child process of its own (`node main.js` beside the files
 * it loads: a ```js block exactly as written, a ```ts block as TypeScript's
 * transpiler emits it), with POISE_LOG_LEVEL unset as on a user's machine.
 * The block must exit 0 by itself (nothing left open), print what its
 * comments say, and write nothing to stderr unless it is about logging.
 *
 * The one edit: the addresses the examples use are this test's servers (and
 * a metrics server's `port: 9464` becomes any free port) —
 * the two HTTP backends (7001, 7002: loopback servers answering
 * `hello from 7001` / `hello from 7002`), Redis (a server started here, the
 * membership of `orders-db` applied first, as the README's `poise members
 * apply` does), and the second PostgreSQL
 * (5433: a port nothing listens on, so the routed connect retries onto the
 * local PostgreSQL on 5432, as the README says it would).
 */
describe('examples run', () => {
  /** Every README block and every `<!-- example: runs -->` block of docs/*.md, each followed by the files it loads. */
  const readme = all.filter((e, k) => e.page === 'README.md' || e.runs === true || (e.file !== undefined && all[k - 1]?.runs === true));
  const runDir = mkdtempSync(path.join(os.tmpdir(), 'poise-readme-run-'));
  const servers: http.Server[] = [];
  let redis: TestRedis | undefined;
  const addresses = new Map<string, string>();

  let requests = 0;
  /** What a block prints (and how many requests it sends the HTTP backends, default none): matched by a line of its text. */
  const EXPECT: { block: string; stdout: RegExp; stderr?: RegExp; requests?: number }[] = [
    // The body printed is the one request's (a `catch` that swallowed a failed fetch would print nothing: the count shows it ran).
    { block: "const router = balancer.router({ policy: 'p2c:latency' })", stdout: /^hello from 700[12]\n$/, requests: 1 },
    { block: "stream: routedStream(balancer.router({ policy: 'p2c:connections' }))", stdout: /^\[ \{ port: 5432 \} \]\n$/ },
    // Here pg-2 (5434) is a port nothing listens on: its first check fails (role unknown), ready() resolves, the read is the primary's.
    { block: "routedStream(router, { intent: 'read', minLsn: lsn })", stdout: /^\[ \{ seen: true \} \]\n$/ },
    { block: 'const source = new RedisMembership({', stdout: /^version 1\n$/ },
    { block: 'new PowerOfTwo({ seed: 42 })', stdout: /^$/ },
    {
      block: "new PoiseDispatcher({ router: balancer.router(), origin: 'http://api' })",
      stdout: /^200 hello from 700[12]\n$/,
      requests: 1,
    },
    // docs/guide.md: the worker pool, the dispatcher in each worker, the owner's HttpCounters scraped once (p2c:latency may send all 4 to one backend: the other counts 0).
    {
      block: 'workerData: { counters: counters.buffer },',
      stdout: /^(hello from 700[12]\n){4}(poise_http_requests_total\{[^}]*backend="api-[12]"[^}]*outcome="success"[^}]*\} [0-4]\n){1,2}$/,
      requests: 4,
    },
  ];

  beforeAll(async () => {
    for (const port of [7001, 7002]) {
      const server = http.createServer((_req, res) => {
        requests++;
        res.end(`hello from ${port}`);
      });
      await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
      servers.push(server);
      addresses.set(`127.0.0.1:${port}`, `127.0.0.1:${(server.address() as net.AddressInfo).port}`);
    }
    addresses.set('127.0.0.1:5433', `127.0.0.1:${await freePort()}`);
    addresses.set('port: 9464', 'port: 0'); // a metrics server's port: any free one
    addresses.set('127.0.0.1:5434', `127.0.0.1:${await freePort()}`);
    redis = await startRedis();
    addresses.set('redis://127.0.0.1:6379', redis.url);
    const pub = new MembershipPublisher({ url: redis.url, cluster: 'orders-db', logger: silent() });
    await pub.apply({
      cluster: 'orders-db',
      backends: [
        { id: 'pg-a', address: '127.0.0.1:5432' },
        { id: 'pg-b', address: '127.0.0.1:5432' },
      ],
    });
    await pub.close();
  }, 120_000);

  afterAll(async () => {
    for (const server of servers) await new Promise((r) => server.close(r));
    await redis?.stop();
    rmSync(runDir, { recursive: true, force: true });
  });

  it('every README block and every docs block marked to run is run (a companion file with the block that loads it) and has its expectation here', () => {
    const runnable = readme.filter((e) => e.file === undefined);
    for (const e of runnable) expect(EXPECT.filter((x) => e.text.includes(x.block)).length, `${e.page} line ${e.line}`).toBe(1);
    expect(runnable).toHaveLength(EXPECT.length);
    expect(readme.filter((e) => e.file !== undefined).map((e) => `${e.page}: ${e.file}`)).toEqual(['docs/guide.md: http-task.js']);
  });

  it.each(EXPECT.map((x) => [x.block, x] as const))('%s', (_name, x) => runBlock(x, addresses));

  it('the read-your-writes block queries the server its read was leased on: against a primary and a replica 2 s behind, its write is seen', async () => {
    // A lease taken on one server and a query sent through another pool can differ: the replica (within maxLagMs, not
    // yet at the write's LSN) would answer, without the row. Nothing waits for time here: the write is seen or not.
    const primary = await startPostgres({ settings: { wal_level: 'replica', max_wal_senders: 5 } });
    const admin = new pg.Client({ host: '127.0.0.1', port: primary.port, user: 'postgres', database: 'postgres' });
    await admin.connect();
    await admin.query('CREATE DATABASE test');
    await admin.end();
    const app = new pg.Client({ host: '127.0.0.1', port: primary.port, user: 'postgres', database: 'test' });
    await app.connect();
    await app.query('CREATE TABLE notes (body text)');
    await app.query('CREATE TABLE ticks (at timestamptz)');
    const replica = await startPgReplica(primary, { applyDelayMs: 2000 });
    // Commits every few ms: the replica's lag stays about 2 s (inside the block's maxLagMs 5000), its LSN 2 s behind.
    let ticking = true;
    const ticker = (async () => {
      while (ticking) await app.query('INSERT INTO ticks VALUES (now())');
    })();
    try {
      const r = new pg.Client({ host: '127.0.0.1', port: replica.port, user: 'postgres', database: 'test' });
      await r.connect();
      // Its first replayed commit (a tick): until then it reads as far behind, and no read would go there at all.
      await until(
        async () => (await r.query('SELECT pg_last_xact_replay_timestamp() IS NOT NULL AS ok')).rows[0].ok === true,
        'the replica to replay a tick',
        30_000,
      );
      await r.end();
      const map = new Map([...addresses, ['127.0.0.1:5432', `127.0.0.1:${primary.port}`], ['127.0.0.1:5434', `127.0.0.1:${replica.port}`]]);
      await runBlock(EXPECT.find((x) => x.block.includes('minLsn'))!, map);
    } finally {
      ticking = false;
      await ticker;
      await app.end();
      await replica.stop();
      await primary.stop();
    }
  }, 120_000);

  /** Runs the README block `x` names with `map`'s addresses, and checks its exit, output and requests. */
  async function runBlock(x: (typeof EXPECT)[number], map: ReadonlyMap<string, string>): Promise<void> {
    const at = readme.findIndex((e) => e.file === undefined && e.text.includes(x.block));
    const main = readme[at]!;
    const dir = mkdtempSync(path.join(runDir, `line-${main.line}-`));
    symlinkSync(path.join(ROOT, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
    writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ type: 'module', private: true }));
    const files: [string, Example][] = [['main.js', main]];
    for (let k = at + 1; k < readme.length && readme[k]!.file !== undefined; k++) files.push([readme[k]!.file!, readme[k]!]);
    for (const [name, e] of files) {
      let text = e.text;
      for (const [from, to] of map) text = text.split(from).join(to);
      // A ```js block runs exactly as written; a ```ts block as TypeScript's transpiler emits it.
      const js =
        e.lang === 'js'
          ? text
          : ts.transpileModule(text, { compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022 } }).outputText;
      writeFileSync(path.join(dir, name), js);
    }
    const before = requests;
    const r = await runNode(path.join(dir, 'main.js'), dir);
    expect({ code: r.code, stderr: x.stderr === undefined ? r.stderr : '' }, `${main.page} line ${main.line}`).toEqual({
      code: 0,
      stderr: '',
    });
    expect(requests - before).toBe(x.requests ?? 0);
    expect(r.stdout).toMatch(x.stdout);
    if (x.stderr !== undefined) expect(r.stderr).toMatch(x.stderr);
  }

  it('every address it replaces occurs in a block that runs (the map edits nothing else)', () => {
    for (const from of addresses.keys())
      expect(
        readme.some((e) => e.text.includes(from)),
        from,
      ).toBe(true);
  });
});

/** A pino logger that writes nowhere, for the test's own publisher. */
function silent() {
  return createLogger({ level: 'silent' });
}

/** `node file` in `cwd` without POISE_LOG_LEVEL; killed (and reported) if it has not exited after 60 s. */
function runNode(file: string, cwd: string): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const env = { ...process.env };
  delete env['POISE_LOG_LEVEL'];
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [file], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const hang = setTimeout(() => {
      stderr += '\n[test] still running after 60 s: something the example opened keeps the process alive\n';
      child.kill('SIGKILL');
    }, 60_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(hang);
      resolve({ code, stdout, stderr });
    });
  });
}
