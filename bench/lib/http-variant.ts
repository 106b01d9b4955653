/**
 * bench/lib/http-variant: what a system name of bench/http asks for. A
 * poise system is `poise POLICY` with optional variant options after it:
 * `ratio=K` (the router's `latencyRatio`), `tau=MS` and `init=MS` (the
 * balancer's PeakEWMA `tauMs` and `initialMs`). `fast only` is p2c:latency
 * over the fast backends alone (the reference row).
 */

/** A poise system's variant options. */
export interface Variant {
  policy: string;
  latencyRatio?: number;
  tauMs?: number;
  initialMs?: number;
}

/** The variant a system name asks for (undefined: not a poise system). */
export function variantOf(system: string): Variant | undefined {
  if (system === 'fast only') return { policy: 'p2c:latency' };
  if (!system.startsWith('poise ')) return undefined;
  const [policy, ...opts] = system.slice('poise '.length).split(' ');
  const v: Variant = { policy: policy! };
  for (const o of opts) {
    const [k, raw] = o.split('=');
    const x = Number(raw);
    if (!Number.isFinite(x) && raw !== 'Infinity') throw new Error(`--systems: ${JSON.stringify(o)} needs a number`);
    if (k === 'ratio') v.latencyRatio = x;
    else if (k === 'tau') v.tauMs = x;
    else if (k === 'init') v.initialMs = x;
    else throw new Error(`--systems: unknown variant option ${JSON.stringify(o)} (ratio=, tau=, init=)`);
  }
  return v;
}
