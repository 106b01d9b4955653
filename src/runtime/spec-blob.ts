/**
 * The spec blob: the string half of the membership (ids, addresses,
 * localities and the other spec fields) that the Balancer publishes into the
 * LoadTable's seqlocked region, so that every router — in any thread, attached
 * at any time, with its event loop busy or not — reads the current membership
 * synchronously when it sees an epoch move. No MessagePort has to be
 * transferred, which piscina's `workerData` could not do anyway.
 *
 * Format: UTF-8 text, one line per live (non-removed) slot after a first line
 * holding the version:
 *
 *     version
 *     slot,generation,[id,address,weight,...]
 *     ...
 *
 * (the spec as a positional JSON array, one place per field in the order of
 * src/core/spec-fields.ts: less than half the bytes of an object, so less to
 * store, copy and parse on every change).
 *
 * `JSON.stringify` escapes newlines, so a line is always one entry. Lines are
 * independent, so a reader compares each line with the one it saw last for
 * that slot and parses only those that changed (a one-backend change parses
 * one spec, not a thousand), and the writer re-serialises only specs that
 * changed.
 */
import { specFromValues, specValues, type ResolvedBackendSpec, type SpecValue } from '../core/spec-fields.js';

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

/** The spec's JSON text (its part of a blob line): the fields as a positional array. */
export function specJson(spec: ResolvedBackendSpec): string {
  return JSON.stringify(specValues(spec));
}

/** The spec a {@link specJson} text holds. */
export function specFromJson(json: string): ResolvedBackendSpec {
  return specFromValues(JSON.parse(json) as SpecValue[]);
}

/** One blob line: `slot,generation,` then the spec's JSON text ({@link specJson}). */
export function blobLine(slot: number, generation: number, json: string): string {
  return `${slot},${generation},${json}`;
}

/** Encodes a membership for {@link LoadTable.publishSpecs} from its lines ({@link blobLine}). */
export function encodeBlobLines(version: number, lines: readonly string[]): Uint8Array {
  return encoder.encode(lines.length === 0 ? String(version) : `${version}\n${lines.join('\n')}`);
}

/** Encodes a membership for {@link LoadTable.publishSpecs}. */
export function encodeBlob(blob: SpecBlob): Uint8Array {
  return encodeBlobLines(
    blob.version,
    blob.entries.map((e) => blobLine(e.slot, e.generation, specJson(e.spec))),
  );
}

/** The lines of what `table.specs.read()` returned: `[]` for the empty blob, else the version line first. */
export function blobLines(bytes: Uint8Array): string[] {
  return bytes.length === 0 ? [] : decoder.decode(bytes).split('\n');
}

/** A blob line's parts: the slot, the generation and where the spec's JSON starts. */
export interface LineHead {
  slot: number;
  generation: number;
  jsonStart: number;
}

/** Reads a line's `slot,generation,` prefix into `out` (decimal digits, no allocation). */
export function lineHead(line: string, out: LineHead): void {
  let k = 0;
  let slot = 0;
  for (let ch = line.charCodeAt(k); ch !== 44; ch = line.charCodeAt(++k)) slot = slot * 10 + (ch - 48);
  let generation = 0;
  for (let ch = line.charCodeAt(++k); ch !== 44; ch = line.charCodeAt(++k)) generation = generation * 10 + (ch - 48);
  out.slot = slot;
  out.generation = generation;
  out.jsonStart = k + 1;
}

/** Decodes what `table.specs.read()` returned (the empty blob is version 0, no entries). */
export function decodeBlob(bytes: Uint8Array): SpecBlob {
  const lines = blobLines(bytes);
  if (lines.length === 0) return { version: 0, entries: [] };
  const head: LineHead = { slot: 0, generation: 0, jsonStart: 0 };
  const entries: BlobEntry[] = [];
  for (let k = 1; k < lines.length; k++) {
    const line = lines[k]!;
    lineHead(line, head);
    entries.push({ slot: head.slot, generation: head.generation, spec: specFromJson(line.slice(head.jsonStart)) });
  }
  return { version: Number(lines[0]), entries };
}
