/**
 * The membership document: `{ cluster, version?, backends: [...] }`, its
 * validation and its text forms (JSON, YAML).
 *
 * Backends are validated by {@link resolveBackendSpecs}, so the file source,
 * the Redis reader, the publisher, the CLI and the Balancer reject the same
 * input with the same message (`backends[3].weight: must be an integer in
 * [1, 4294967295], got -2`). This file adds the document-level laws: a
 * cluster name, an optional version, no unknown top-level fields, a size cap.
 */
import { createRequire } from 'node:module';
import type { parse as YamlParse } from 'yaml';
import { PoiseError, invalidConfig } from '../core/errors.js';
import { isResolvedSpec, resolveBackendSpecs, type ResolvedBackendSpec } from '../core/spec.js';
import { compactSpec } from '../core/spec-fields.js';
import { resolveHealthConfig, type HealthConfig } from '../health/config.js';
import { validateName } from './name.js';
import { resolveRetryBudget, type RetryBudgetOptions } from '../runtime/retry-budget.js';
import { resolveSlowStart, type SlowStartOptions } from '../runtime/slow-start-options.js';
import { resolveConnectionBudget, type ConnectionBudgetOptions } from '../runtime/connection-budget-options.js';
import { integerIn } from '../core/validate.js';

/** A validated document: every backend default filled in. */
export interface ResolvedDocument {
  /** The validated cluster name. */
  cluster: string;
  /** The document's own version, when it has one. */
  version: number | undefined;
  /** The validated backends, defaults filled in, in document order. */
  backends: ResolvedBackendSpec[];
  /** The health block as written (validated), when the document has one. */
  health?: HealthConfig;
  /** The retry budget block as written (validated), when the document has one. */
  retryBudget?: RetryBudgetOptions | false;
  /** The slow start block as written (validated), when the document has one. */
  slowStart?: SlowStartOptions | false;
  /** The fleet connection budget's limit per backend for every FleetConnectionBudget following this cluster (docs/connection-budget.md), or `false` for none. */
  connectionBudget?: ConnectionBudgetOptions | false;
}

/** The cluster-wide blocks of a document (beside its backends), which a snapshot carries to the Balancer. */
type Settings = Pick<ResolvedDocument, 'health' | 'retryBudget' | 'slowStart' | 'connectionBudget'>;

/** The cluster-wide blocks, in the order the canonical JSON writes them. */
const SETTINGS = ['health', 'retryBudget', 'slowStart', 'connectionBudget'] as const;

/** Copies the cluster-wide blocks (`health`, `retryBudget`, `slowStart`, `connectionBudget`) that `from` has onto `to`; returns `to`. @internal */
export function copySettings<T extends { health?: unknown; retryBudget?: unknown; slowStart?: unknown; connectionBudget?: unknown }>(
  from: Settings,
  to: T,
): T {
  for (const k of SETTINGS) if (from[k] !== undefined) (to as Record<string, unknown>)[k] = from[k];
  return to;
}

/** Whether two documents have the same cluster-wide blocks. @internal */
export function sameSettings(a: Settings, b: Settings): boolean {
  return SETTINGS.every((k) => JSON.stringify(a[k]) === JSON.stringify(b[k]));
}

/** Text formats a document may be written in. */
export type DocumentFormat = 'json' | 'yaml';

/** Default size cap of a document, a Redis snapshot and a change notice: 1 MiB. */
export const DEFAULT_MAX_DOCUMENT_BYTES = 1024 * 1024;

/** The largest membership version (versions must stay exact as JS numbers). @internal */
export const MAX_VERSION = Number.MAX_SAFE_INTEGER;

const DOCUMENT_FIELDS: ReadonlySet<string> = new Set([
  'cluster',
  'version',
  'backends',
  'health',
  'retryBudget',
  'slowStart',
  'connectionBudget',
]);

/** Validates a membership version: an integer in [0, 2^53 − 1]. @internal */
export function validateVersion(value: unknown, field = 'version'): number {
  return integerIn(value, field, 0, MAX_VERSION);
}

/**
 * Validates a parsed document. `path` prefixes field names in messages
 * (`document` gives `document.backends[3].weight`; the default gives
 * `backends[3].weight`). Throws {@link PoiseError}.
 *
 * @example
 * const doc = resolveDocument({ cluster: 'db', backends: [{ id: 'a', address: '10.0.0.1:5432' }] });
 */
export function resolveDocument(value: unknown, path = ''): ResolvedDocument {
  const at = (field: string): string => (path === '' ? field : `${path}.${field}`);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    invalidConfig(
      path === '' ? 'document' : path,
      'must be an object { cluster, version?, backends, health?, retryBudget?, slowStart?, connectionBudget? }',
      value,
    );
  }
  const doc = value as Record<string, unknown>;
  for (const key of Object.keys(doc)) {
    if (!DOCUMENT_FIELDS.has(key)) {
      throw new PoiseError(
        'InvalidConfig',
        `${at(key)}: unknown field (accepted: cluster, version, backends, health, retryBudget, slowStart, connectionBudget)`,
        { field: at(key) },
      );
    }
  }
  const cluster = validateName(doc['cluster'], at('cluster'));
  const version = doc['version'] === undefined ? undefined : validateVersion(doc['version'], at('version'));
  const backends = resolveBackendSpecs(doc['backends'], at('backends'));
  const out: ResolvedDocument = { cluster, version, backends };
  // Validated here so a bad block names its field and keeps the last good state; kept as written.
  if (doc['health'] !== undefined) {
    resolveHealthConfig(doc['health'], at('health'), true);
    out.health = doc['health'] as HealthConfig;
  }
  if (doc['retryBudget'] !== undefined) {
    if (doc['retryBudget'] !== false) resolveRetryBudget(doc['retryBudget'], at('retryBudget'));
    out.retryBudget = doc['retryBudget'] as RetryBudgetOptions | false;
  }
  if (doc['slowStart'] !== undefined) {
    resolveSlowStart(doc['slowStart'], at('slowStart'));
    out.slowStart = doc['slowStart'] as SlowStartOptions | false;
  }
  if (doc['connectionBudget'] !== undefined) {
    resolveConnectionBudget(doc['connectionBudget'], at('connectionBudget'));
    out.connectionBudget = doc['connectionBudget'] as ConnectionBudgetOptions | false;
  }
  return out;
}

/** The format implied by a file name: `.yaml`/`.yml` → YAML, anything else → JSON. @internal */
export function formatOf(file: string): DocumentFormat {
  return /\.ya?ml$/i.test(file) ? 'yaml' : 'json';
}

/** Throws `InvalidConfig` when `text` is larger than `maxBytes` (UTF-8). @internal */
export function checkSize(text: string, maxBytes: number, field = 'document'): void {
  // A cheap bound first: UTF-8 never takes fewer bytes than UTF-16 code units.
  if (text.length * 3 <= maxBytes) return;
  const bytes = Buffer.byteLength(text, 'utf8');
  if (bytes > maxBytes) {
    throw new PoiseError('InvalidConfig', `${field}: ${bytes} bytes exceeds the limit of ${maxBytes} bytes`, { field });
  }
}

/**
 * Parses document text (JSON or YAML) and validates it. Size is checked
 * before parsing, so an oversized input costs nothing.
 *
 * @example
 * const doc = parseDocument(readFileSync('members.yaml', 'utf8'), { format: 'yaml' });
 */
export function parseDocument(text: string, opts: { format?: DocumentFormat; maxBytes?: number } = {}): ResolvedDocument {
  if (typeof text !== 'string') invalidConfig('document', 'must be a string of JSON or YAML', text);
  if (opts.format !== undefined && opts.format !== 'json' && opts.format !== 'yaml') {
    invalidConfig('options.format', 'must be "json" or "yaml"', opts.format);
  }
  /** @internal */
  checkSize(text, opts.maxBytes ?? DEFAULT_MAX_DOCUMENT_BYTES);
  return resolveDocument(parseText(text, opts.format ?? 'json', 'document'));
}

const requireModule = createRequire(import.meta.url);
let yamlParse: typeof YamlParse | undefined;

/**
 * yaml's `parse`, loaded by the first YAML document: the package is 72
 * modules and about 1 MB of heap that a process reading only JSON (every
 * `poise proxy --backend`, every Redis snapshot) never needs — 0.5 MiB of
 * RSS on Node 24, 1.5 on Node 20 (docs/benchmarks.md, "Where idle RSS goes").
 */
function parseYaml(text: string, options: Parameters<typeof YamlParse>[2]): unknown {
  yamlParse ??= (requireModule('yaml') as { parse: typeof YamlParse }).parse;
  return yamlParse(text, options);
}

/** JSON.parse or YAML parse, with the failure reported as `InvalidConfig` on `field`. @internal */
export function parseText(text: string, format: DocumentFormat, field: string): unknown {
  try {
    return format === 'yaml' ? parseYaml(text, { uniqueKeys: true, maxAliasCount: 100 }) : JSON.parse(text);
  } catch (err) {
    const reason = err instanceof Error ? (err.message.split('\n')[0] ?? err.message) : String(err);
    throw new PoiseError('InvalidConfig', `${field}: malformed ${format === 'yaml' ? 'YAML' : 'JSON'} (${reason})`, { field, cause: err });
  }
}

/** The JSON of each frozen resolved spec's compact form: a document that changed one backend re-serialises one. */
const COMPACT_JSON = new WeakMap<ResolvedBackendSpec, string>();

/** `JSON.stringify(compactSpec(spec))`, remembered for the frozen specs resolveBackendSpec returned. */
function compactJson(spec: ResolvedBackendSpec): string {
  if (!isResolvedSpec(spec)) return JSON.stringify(compactSpec(spec));
  let json = COMPACT_JSON.get(spec);
  if (json === undefined) {
    json = JSON.stringify(compactSpec(spec));
    COMPACT_JSON.set(spec, json);
  }
  return json;
}

/**
 * The canonical JSON of a document without its version (Redis keeps the
 * version beside it): exactly `JSON.stringify({ cluster, backends:
 * backends.map(compactSpec), health?, retryBudget?, slowStart?, connectionBudget? })`, assembled from each spec's
 * remembered JSON. @internal
 */
export function documentJson(doc: { cluster: string; backends: readonly ResolvedBackendSpec[] } & Settings): string {
  const parts = new Array<string>(doc.backends.length);
  for (let i = 0; i < parts.length; i++) parts[i] = compactJson(doc.backends[i]!);
  let settings = '';
  for (const k of SETTINGS) if (doc[k] !== undefined) settings += `,${JSON.stringify(k)}:${JSON.stringify(doc[k])}`;
  return `{"cluster":${JSON.stringify(doc.cluster)},"backends":[${parts.join(',')}]${settings}}`;
}
