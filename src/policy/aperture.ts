/**
 * Deterministic aperture (Finagle's): in a large fleet over many backends,
 * each process uses only a contiguous slice of the ring of backends, so
 * that a backend sees a few processes' connections instead of all of them,
 * while every backend still receives an equal share of the fleet's load.
 *
 * Both the processes and the backends sit on the unit ring: process `rank`
 * of `processes` at `rank / processes`, backend `i` of `n` on `[i / n,
 * (i + 1) / n)`. The process's slice is `[rank / processes, rank / processes
 * + w)`, and a backend's weight in it is the length of its overlap with the
 * slice — so the boundary backends, partly covered, get a fractional weight.
 * The width `w` is `max(width, 1 / processes)` rounded up to a whole number
 * `k` of process units (`k / processes`): the slices then cover every point
 * of the ring exactly `k` times, so each backend's weights over all
 * processes sum to the same total (Finagle rounds the same way for the
 * same reason).
 *
 * Exact integer arithmetic: the ring is cut into `n × processes` units, a
 * backend spans `processes` of them and a process unit `n`; a weight is an
 * overlap in those units (1 to `processes`), and every backend's weights
 * over all processes sum to `k × processes`.
 *
 * The coordinate (`rank`, `processes`) comes from the fleet connection
 * budget's lease (budget/redis-connection-budget.ts), not from
 * configuration.
 */

/** One backend of a slice: its index in the ring (sorted backends) and its weight, in ring units (1 to `processes`). */
export interface ApertureMember {
  index: number;
  weight: number;
}

/**
 * The slice of a ring of `n` backends that process `rank` of `processes`
 * uses with aperture `width` (a fraction of the ring in (0, 1]); members in
 * ring order from the slice's start. Throws `RangeError` naming a bad argument.
 */
export function apertureSlice(rank: number, processes: number, n: number, width: number): ApertureMember[] {
  if (!Number.isInteger(processes) || processes < 1) throw new RangeError(`processes must be an integer ≥ 1, got ${processes}`);
  if (!Number.isInteger(rank) || rank < 0 || rank >= processes)
    throw new RangeError(`rank must be an integer in [0, ${processes}), got ${rank}`);
  if (!Number.isInteger(n) || n < 1) throw new RangeError(`n must be an integer ≥ 1, got ${n}`);
  if (!(width > 0 && width <= 1)) throw new RangeError(`width must be in (0, 1], got ${width}`);
  const k = Math.min(processes, Math.max(1, Math.ceil(width * processes - 1e-9)));
  const ring = n * processes;
  const start = rank * n;
  const length = k * n;
  const out: ApertureMember[] = [];
  if (length === ring) {
    for (let i = 0; i < n; i++) out.push({ index: (Math.floor(start / processes) + i) % n, weight: processes });
    return out;
  }
  // Walk the backends the slice [start, start + length) touches, in ring order (wrapping).
  let at = start;
  const end = start + length;
  while (at < end) {
    const b = Math.floor(at / processes);
    const next = Math.min((b + 1) * processes, end);
    out.push({ index: b % n, weight: next - at });
    at = next;
  }
  // A slice that wraps into the backend it started in (few backends): one member, both overlaps.
  if (out.length > 1 && out[0]!.index === out[out.length - 1]!.index) out[0]!.weight += out.pop()!.weight;
  return out;
}
