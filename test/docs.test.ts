/**
 * The documentation's code is checked like code: every ```ts block of
 * README.md and docs/*.md is compiled against the built package (its public
 * entries, as a user imports them) with the project's strict options, and
 * the README's tables are compared with the names the code exports.
 *
 * A block is its own module. A block preceded by `<!-- example: continues -->`
 * is appended to the block before it (so a page can build one example in steps).
 * Free names an example leaves to the reader (`callBackend`, ...) are declared
 * in PRELUDE below, with their types, so the rest is checked.
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { afterAll, describe, expect, it } from 'vitest';
import { POLICY_NAMES } from '../src/runtime/policies.js';
import { EXIT } from '../src/cli/exit.js';
import { POISE_ERROR_CODES } from '../src/core/errors.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
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
}

/** The ```ts blocks of one page, continuations joined. */
function examples(page: string): Example[] {
  const lines = readFileSync(path.join(ROOT, page), 'utf8').split('\n');
  const out: Example[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(ts|typescript)\s*$/.exec(lines[i]!);
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
    const continues =
      lines
        .slice(0, start - 1)
        .reverse()
        .find((l) => l.trim() !== '') === '<!-- example: continues -->';
    const previous = out[out.length - 1];
    if (continues && previous) previous.text += `\n${body.join('\n')}`;
    else out.push({ page, line: start, text: body.join('\n') });
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
});

describe('README tables', () => {
  const readme = readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  /** The first column of the table under `heading`, backticks removed. */
  function firstColumn(heading: string): string[] {
    const at = readme.indexOf(`\n${heading}\n`);
    expect(at, `README has a "${heading}" section`).toBeGreaterThan(-1);
    const rows = readme.slice(at).split('\n').slice(1);
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

  it('the policy table lists every runtime policy name, once, in the order of POLICY_NAMES', () => {
    expect(firstColumn('## Policies')).toEqual([...POLICY_NAMES]);
  });

  it('the exit-code table lists every exit code of the CLI table, then 130 (bench interrupted)', () => {
    const codes = [...new Set(Object.values(EXIT))].sort((a, b) => a - b).map(String);
    expect(firstColumn('### Exit codes')).toEqual([...codes, '130']);
  });

  it('the error table lists every PoiseError code, once', () => {
    expect([...firstColumn('## Errors and bad input')].sort()).toEqual([...POISE_ERROR_CODES].sort());
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
