/**
 * The spec blob: the string half of the membership (ids, addresses,
 * localities and the other spec fields) that the Balancer publishes into the
 * LoadTable's seqlocked region, so that every router — in any thread, attached
 * at any time, with its event loop busy or not — reads the current membership
 * synchronously when it sees an epoch move. No MessagePort has to be
 * transferred, which piscina's `workerData` could not do anyway.
 *
 * Format: UTF-8 JSON `{ v: version, s: [[slot, generation, spec], ...] }` of
 * every live (non-removed) slot.
 */
import type { ResolvedBackendSpec } from '../core/spec.js';

/** One published slot. */
export interface BlobEntry {
  slot: number;
  generation: number;
  spec: ResolvedBackendSpec;
}

/** A decoded blob. */
export interface SpecBlob {
  version: number;
  entries: BlobEntry[];
}

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Encodes a membership for {@link LoadTable.publishSpecs}. */
export function encodeBlob(blob: SpecBlob): Uint8Array {
  return encoder.encode(JSON.stringify({ v: blob.version, s: blob.entries.map((e) => [e.slot, e.generation, e.spec]) }));
}

/** Decodes what {@link LoadTable.readSpecs} returned (the empty blob is version 0, no entries). */
export function decodeBlob(bytes: Uint8Array): SpecBlob {
  if (bytes.length === 0) return { version: 0, entries: [] };
  const raw = JSON.parse(decoder.decode(bytes)) as { v: number; s: [number, number, ResolvedBackendSpec][] };
  return { version: raw.v, entries: raw.s.map(([slot, generation, spec]) => ({ slot, generation, spec })) };
}
