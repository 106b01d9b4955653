// `npm run build` (what `npm start`, `npm test` and every bench script run
// first) builds only what changed: it is `tsc -b` over the library and the
// bench package, incremental, with no clean. Run in a copy of the sources,
// so the repository's own dist/ is never written while other tests read it.
// Two projects write dist/: tsconfig.build.json the JavaScript, without
// comments, and tsconfig.types.json the declarations, with their docs.
import { spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const work = mkdtempSync(path.join(os.tmpdir(), 'poise-build-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

function build(): { status: number | null; out: string } {
  const r = spawnSync('npm', ['run', 'build', '--', '--verbose'], {
    cwd: work,
    encoding: 'utf8',
    env: { ...process.env, npm_config_update_notifier: 'false' },
  });
  return { status: r.status, out: r.stdout + r.stderr };
}

/** Every file under dir/ with its modification time. */
function outputs(dir: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const f of readdirSync(path.join(work, dir), { recursive: true }) as string[]) {
    const st = statSync(path.join(work, dir, f));
    if (st.isFile()) out.set(f, st.mtimeMs);
  }
  return out;
}

describe('npm run build', () => {
  it('compiles everything once, then nothing while no source changes, then only after a source changed; it never cleans', () => {
    // test/helpers: bench/discovery.ts runs the tests' Kubernetes API server (tsconfig.build.json builds kube-api.ts and its imports).
    for (const p of [
      'src',
      'bench',
      'test/helpers',
      'packages/bench/src',
      'tsconfig.json',
      'tsconfig.build.json',
      'tsconfig.types.json',
      'packages/bench/tsconfig.build.json',
    ]) {
      cpSync(path.join(ROOT, p), path.join(work, p), { recursive: true });
    }
    cpSync(path.join(ROOT, 'packages/bench/package.json'), path.join(work, 'packages/bench/package.json'));
    const pkg = JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts['build']).not.toMatch(/clean/);
    for (const s of ['prestart', 'pretest']) expect(pkg.scripts[s]).toBe('npm run build');
    writeFileSync(
      path.join(work, 'package.json'),
      JSON.stringify({ name: 'poise-lb', private: true, type: 'module', scripts: pkg.scripts }),
    );
    symlinkSync(path.join(ROOT, 'node_modules'), path.join(work, 'node_modules'), 'dir');

    const first = build();
    expect(first.status, first.out).toBe(0);
    expect(first.out).toContain("Building project '");
    const built = outputs('dist');
    expect([...built.keys()]).toContain('src/cli/main.js');

    const again = build();
    expect(again.status, again.out).toBe(0);
    expect(again.out).not.toContain("Building project '");
    expect(again.out).toMatch(/Project 'tsconfig\.build\.json' is up to date/);
    expect(again.out).toMatch(/Project 'tsconfig\.types\.json' is up to date/);
    expect(outputs('dist')).toEqual(built); // not one output rewritten

    // A documented export added: the JavaScript has it without its comment
    // (tsconfig.build.json removes comments), the declarations with it (tsconfig.types.json).
    const doc = '/** Added by the build test: its doc reaches the declarations. */';
    writeFileSync(
      path.join(work, 'src/core/time.ts'),
      `${readFileSync(path.join(work, 'src/core/time.ts'), 'utf8')}\n${doc}\nexport const buildTestMark = 1;\n`,
    );
    const changed = build();
    expect(changed.status, changed.out).toBe(0);
    expect(changed.out).toContain(`Building project '${path.join(work, 'tsconfig.build.json')}'`);
    expect(changed.out).toContain(`Building project '${path.join(work, 'tsconfig.types.json')}'`);
    const js = readFileSync(path.join(work, 'dist/src/core/time.js'), 'utf8');
    expect(js).toContain('buildTestMark = 1');
    expect(js).not.toContain(doc);
    expect(js).not.toMatch(/^\s*(\/\/|\/\*)/m); // no comment line at all
    expect(readFileSync(path.join(work, 'dist/src/core/time.d.ts'), 'utf8')).toContain(`${doc}\nexport declare const buildTestMark = 1;`);
  }, 600_000);
});
