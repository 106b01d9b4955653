/**
 * The undici majors the HTTP dispatcher is tested against: the `undici`
 * devDependency (7.x) always, and the `undici8` alias (8.x) where the Node
 * version runs it (undici 8 needs Node >= 22.19). A variant's `fetch` /
 * `request` / interceptors drive the dispatcher; its pools are made by its
 * own `Pool`. undici 7 runs twice: with the dispatcher's default pools
 * (undici 7 runs the older handler API natively, so an older-API caller's
 * attempts use it) and with a `factory` (attempts in the new API, which any
 * pool accepts).
 */
import * as undici7 from 'undici';
import type { PoolFactory } from '../../src/http/pools.js';

export interface UndiciVariant {
  readonly name: string;
  readonly u: typeof undici7;
  /** Undefined: the dispatcher's default pools (the installed undici, 7). */
  readonly factory: PoolFactory | undefined;
}

/** True when this Node runs undici 8 (>= 22.19). */
export function runsUndici8(version = process.versions.node): boolean {
  const [major = 0, minor = 0] = version.split('.').map(Number);
  return major > 22 || (major === 22 && minor >= 19);
}

function variant(name: string, u: typeof undici7): UndiciVariant {
  return { name, u, factory: (origin, opts) => new u.Pool(origin, opts) as never };
}

/** undici 7 (default pools, and pools from a factory), and undici 8 when this Node runs it. */
export async function undiciVariants(): Promise<UndiciVariant[]> {
  const out: UndiciVariant[] = [{ name: 'undici 7', u: undici7, factory: undefined }, variant('undici 7 (factory)', undici7)];
  if (runsUndici8()) {
    // A specifier TypeScript does not resolve: undici8 is installed only where Node runs it (packages/undici8).
    const specifier: string = 'undici8';
    const u8 = (await import(specifier)) as typeof undici7;
    out.push(variant('undici 8', u8));
  }
  return out;
}
