/**
 * Delta notices: the few operations that turn one stored document into the
 * next, so a change of one backend is published as a few hundred bytes
 * instead of the whole document (about 60 KB at 1,000 backends), which
 * Redis would otherwise write to every subscriber.
 *
 * Ops, applied in order to the document a reader holds at `base`:
 *
 *   {"op":"remove","id":"b7"}                                  drop backend b7
 *   {"op":"replace","backend":{"id":"b7","address":...}}       replace b7 in place (drain, undrain, weight, ...)
 *   {"op":"add","backend":{"id":"b9","address":...}}           append b9
 *
 * A diff is expressible exactly when the new document keeps the surviving
 * backends in their old order and appends the new ones (every single-backend
 * operation does); a reorder is published as the whole document.
 *
 * The `digest` (SHA-1 of the canonical document JSON, {@link documentJson})
 * makes a delta exact: a reader that applies the ops to a document that is
 * not the publisher's base (after a failover lost writes, two documents can
 * carry one version) gets another digest and re-reads the snapshot instead of
 * routing on a document nobody stored.
 */
import { createHash } from 'node:crypto';
import { PoiseError } from '../core/errors.js';
import { checkBackendSet, resolveBackendSpec, type BackendSpec, type ResolvedBackendSpec } from '../core/spec.js';
import { compactSpec, sameSpec } from '../core/spec-fields.js';
import { checkSize, copySettings, documentJson, type ResolvedDocument } from './document.js';

/** One delta operation, as published (backends in compact form). */
export type DeltaOp = { op: 'remove'; id: string } | { op: 'replace'; backend: BackendSpec } | { op: 'add'; backend: BackendSpec };

/** One validated delta operation (backends resolved). @internal */
export type ResolvedDeltaOp = { op: 'remove'; id: string } | { op: 'replace' | 'add'; backend: ResolvedBackendSpec };

/** The digest of a document's canonical JSON: 40 lowercase hex digits. @internal */
export function documentDigest(json: string): string {
  return createHash('sha1').update(json).digest('hex');
}

/** A digest as it appears in a notice. @internal */
export const DIGEST = /^[0-9a-f]{40}$/;

/**
 * The ops that turn `from` into `to` (removes, then in-place replaces, then
 * appends), or undefined when `to` reorders the surviving backends. Both
 * lists are validated (unique ids). @internal
 */
export function diffBackends(from: readonly ResolvedBackendSpec[], to: readonly ResolvedBackendSpec[]): DeltaOp[] | undefined {
  const toIds = new Set<string>();
  for (const b of to) toIds.add(b.id);
  const ops: DeltaOp[] = [];
  const kept: ResolvedBackendSpec[] = [];
  for (const b of from) {
    if (toIds.has(b.id)) kept.push(b);
    else ops.push({ op: 'remove', id: b.id });
  }
  // Every kept backend is in `to`; ids are unique, so `to` keeps the old order iff its first kept.length entries are `kept`.
  for (let i = 0; i < kept.length; i++) {
    const next = to[i]!;
    const prev = kept[i]!;
    if (next.id !== prev.id) return undefined;
    if (!sameSpec(prev, next)) ops.push({ op: 'replace', backend: compactSpec(next) });
  }
  for (let i = kept.length; i < to.length; i++) ops.push({ op: 'add', backend: compactSpec(to[i]!) });
  return ops;
}

const OP_FIELDS: Record<string, readonly string[]> = { remove: ['op', 'id'], replace: ['op', 'backend'], add: ['op', 'backend'] };

/** Validates the `ops` of a notice (shape, op names, every backend spec); throws `InvalidConfig` naming the field. @internal */
export function resolveOps(value: unknown, path: string): ResolvedDeltaOp[] {
  if (!Array.isArray(value)) throw new PoiseError('InvalidConfig', `${path}: must be an array of operations`, { field: path });
  const out: ResolvedDeltaOp[] = [];
  for (let i = 0; i < value.length; i++) {
    const at = `${path}[${i}]`;
    const op = value[i] as Record<string, unknown> | null;
    if (typeof op !== 'object' || op === null || Array.isArray(op)) {
      throw new PoiseError('InvalidConfig', `${at}: must be an object { op, ... }`, { field: at });
    }
    const name = op['op'];
    const fields = typeof name === 'string' ? OP_FIELDS[name] : undefined;
    if (fields === undefined) {
      throw new PoiseError('InvalidConfig', `${at}.op: unknown operation ${JSON.stringify(name)} (accepted: remove, replace, add)`, {
        field: `${at}.op`,
      });
    }
    for (const key of Object.keys(op)) {
      if (!fields.includes(key)) {
        throw new PoiseError(
          'InvalidConfig',
          `${at}.${key}: unknown field of a ${String(name)} operation (accepted: ${fields.join(', ')})`,
          {
            field: `${at}.${key}`,
          },
        );
      }
    }
    if (name === 'remove') {
      const id = op['id'];
      if (typeof id !== 'string' || id.length === 0)
        throw new PoiseError('InvalidConfig', `${at}.id: must be a backend id`, { field: `${at}.id` });
      out.push({ op: 'remove', id });
    } else out.push({ op: name as 'replace' | 'add', backend: resolveBackendSpec(op['backend'], `${at}.backend`) });
  }
  return out;
}

/**
 * Applies validated ops to `document`, validates the result as a snapshot
 * is validated and checks it against `digest`. Every spec of the result was
 * validated by resolveBackendSpec (the held ones when their snapshot or
 * delta arrived, the new ones in {@link resolveOps}), and the cluster and
 * health block are the held, validated ones; what is left of a snapshot's
 * validation is the cross-member laws (unique ids, locality weights) and the
 * size, checked here on the result. Throws
 * `PoiseError` naming the field (`notice.ops[0].id: no backend "x"`,
 * `notice.digest: ...`); `document` is never modified. @internal
 */
export function applyDelta(
  document: ResolvedDocument,
  ops: readonly ResolvedDeltaOp[],
  digest: string,
  opts: { maxBytes: number; what: string },
): ResolvedDocument {
  const { what } = opts;
  const backends = document.backends.slice();
  for (let i = 0; i < ops.length; i++) {
    const op = ops[i]!;
    if (op.op === 'add') {
      backends.push(op.backend);
      continue;
    }
    const id = op.op === 'remove' ? op.id : op.backend.id;
    const at = backends.findIndex((b) => b.id === id);
    if (at < 0) {
      const field = `${what}.ops[${i}].${op.op === 'remove' ? 'id' : 'backend.id'}`;
      throw new PoiseError('InvalidConfig', `${field}: no backend ${JSON.stringify(id)} in the held document`, { field });
    }
    if (op.op === 'remove') backends.splice(at, 1);
    else backends[at] = op.backend;
  }
  checkBackendSet(backends, `${what}.document.backends`);
  const next = copySettings(document, { cluster: document.cluster, version: undefined, backends } as ResolvedDocument);
  const json = documentJson(next);
  checkSize(json, opts.maxBytes, `${what}.document`);
  if (documentDigest(json) !== digest) {
    throw new PoiseError(
      'Corrupt',
      `${what}.digest: the ops applied to the held document give another document than the publisher stored (digest ${digest}); the held document is not the notice's base`,
      { field: `${what}.digest` },
    );
  }
  return next;
}
