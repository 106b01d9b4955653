/**
 * Imports a module graph of ours one file at a time, so that loading it
 * holds at most one module file open, whatever the size of the graph.
 *
 * Why: Node 20's ESM loader reads a module's static imports concurrently
 * (an async `readFile` each: open, fstat, read, close as separate thread-pool
 * jobs), so every file of a graph's frontier is open at once — `poise proxy`
 * held 45 module files open while it started and failed with EMFILE under
 * `ulimit -n 64`. Node 22.23, 24 and 26 read them synchronously; this costs
 * them one more read of each file.
 *
 * How: the graph is walked first from the files' text (each read
 * synchronously, one open at a time), following the relative static
 * `import` and `export ... from` declarations of the compiled JavaScript, in
 * source order; then each module is imported in depth-first post-order —
 * the order ECMAScript evaluates the graph in — so every import finds its
 * dependencies loaded and evaluated and reads one new file. Evaluation order
 * is the native one, cycles included ({@link importOrder}). Package imports (`pino`, ...) are left to the loader
 * (the ones poise loads are CommonJS, read synchronously), and so are
 * dynamic `import()`s and imports with attributes.
 * @internal
 */
import { readFileSync } from 'node:fs';

/**
 * A static import or re-export declaration of a relative `.js` / `.mjs`
 * module at the start of a line, without attributes: what `tsc` emits for
 * `import ... from './x.js'`, `import './x.js'`, `export ... from './x.js'`.
 * `import(...)` and `import.meta` do not match (no quote after the keyword),
 * nor does a declaration inside a comment (it starts with ` *` or `//`).
 */
const DECLARATION = /^(?:import|export)(?:[\s{*][\w$*{},\s]*?[\s}*]from)?\s*(['"])(\.{1,2}\/[^'"\n]+\.m?js)\1[ \t]*;?[ \t]*(?:\/\/.*)?$/gm;

/** The relative module specifiers of the static declarations of `source` (compiled JavaScript), in source order. @internal */
export function staticImports(source: string): string[] {
  const out: string[] = [];
  for (const m of source.matchAll(DECLARATION)) out.push(m[2]!);
  return out;
}

/**
 * The modules of the graph under `entry` (URLs) to import one by one, `entry`
 * last, so that each import evaluates exactly what ECMAScript's evaluation of
 * `entry` would evaluate next. That order is the depth-first post-order of
 * the static imports in source order (a module after its dependencies, an
 * import of a module still on the walk's stack — a cycle — skipped). A module
 * is imported at its place in that order when its import evaluates nothing
 * else not yet evaluated: when it is the first module of its import cycle the
 * walk entered (Tarjan's root of its strongly connected component; a module
 * on no cycle is its own) and the modules since the last import all lie under
 * it in the walk. A module on a cycle that is not the cycle's root is left
 * out, and so is every module after it until such an import brings them in,
 * as it would in the native order. `read` gives a module's text, or undefined
 * when it cannot be read (left to the loader, which reports it). @internal
 */
export function importOrder(entry: string, read: (url: string) => string | undefined): string[] {
  /** Each module in post-order, with the post-order position its walk began at, and whether it may be imported alone. */
  const post: { url: string; first: number; alone: boolean }[] = [];
  /** Depth-first index and lowest index reachable (Tarjan's lowlink) of each module the walk entered. */
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  /** Tarjan's stack: modules entered whose component is not complete yet. */
  const pending: string[] = [];
  const inPending = new Set<string>();
  /** The walk's stack: each module with its dependencies and the next one to visit. */
  const stack: { url: string; readable: boolean; deps: string[]; next: number; first: number }[] = [];
  const enter = (url: string): void => {
    const text = read(url);
    index.set(url, index.size);
    low.set(url, index.get(url)!);
    pending.push(url);
    inPending.add(url);
    const deps = text === undefined ? [] : staticImports(text).map((s) => new URL(s, url).href);
    stack.push({ url, readable: text !== undefined, deps, next: 0, first: post.length });
  };
  enter(entry);
  while (stack.length > 0) {
    const top = stack[stack.length - 1]!;
    const dep = top.deps[top.next++];
    if (dep !== undefined) {
      if (!index.has(dep)) enter(dep);
      else if (inPending.has(dep)) low.set(top.url, Math.min(low.get(top.url)!, index.get(dep)!));
      continue;
    }
    stack.pop();
    const root = low.get(top.url) === index.get(top.url);
    if (root) {
      for (let u = pending.pop()!; ; u = pending.pop()!) {
        inPending.delete(u);
        if (u === top.url) break;
      }
    }
    const parent = stack[stack.length - 1];
    if (parent !== undefined) low.set(parent.url, Math.min(low.get(parent.url)!, low.get(top.url)!));
    post.push({ url: top.url, first: top.first, alone: root && top.readable });
  }
  const order: string[] = [];
  /** Post-order position of the first module not evaluated by the imports chosen so far. */
  let evaluated = 0;
  for (let i = 0; i < post.length; i++) {
    const m = post[i]!;
    if (!m.alone || m.first > evaluated) continue;
    order.push(m.url);
    evaluated = i + 1;
  }
  if (order[order.length - 1] !== entry) order.push(entry);
  return order;
}

/** A module's text, or undefined when it cannot be read. */
function readModule(url: string): string | undefined {
  try {
    return readFileSync(new URL(url), 'utf8');
  } catch {
    return undefined;
  }
}

/**
 * `import(entry)`, with the graph under it loaded one file at a time (see
 * the file's comment): resolves with the entry's namespace, rejects as
 * `import(entry)` would. @internal
 */
export async function importInOrder(entry: URL): Promise<unknown> {
  const order = importOrder(entry.href, readModule);
  for (let i = 0; i < order.length - 1; i++) await import(order[i]!);
  return import(entry.href);
}
