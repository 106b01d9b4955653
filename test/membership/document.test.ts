import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { resolveBackendSpec, type ResolvedBackendSpec } from '../../src/core/spec.js';
import type { HealthConfig } from '../../src/health/config.js';
import { compactSpec } from '../../src/core/spec-fields.js';
import { documentJson, parseDocument, resolveDocument } from '../../src/membership/document.js';
import { decodeEnvelope, membershipKeys } from '../../src/membership/redis-keys.js';
import { thrown } from '../helpers/thrown.js';

const ok = {
  cluster: 'db',
  backends: [
    { id: 'a', address: '10.0.0.1:5432' },
    { id: 'b', address: '[::1]:5433', weight: 3 },
  ],
};

function message(f: () => unknown): string {
  return thrown(f).message;
}

describe('membership document', () => {
  it('accepts a valid document and fills defaults', () => {
    const doc = resolveDocument({ ...ok, version: 4 });
    expect(doc.cluster).toBe('db');
    expect(doc.version).toBe(4);
    expect(doc.backends[0]).toEqual({
      id: 'a',
      address: '10.0.0.1:5432',
      weight: 1,
      priority: 0,
      locality: '',
      localityWeight: 1,
      status: 'ready',
      maxInflight: 0,
      panicEligible: true,
      role: 'none',
      hostname: '',
      fallbackIp: '',
    });
  });

  it.each([
    [
      'negative weight',
      { cluster: 'db', backends: [ok.backends[0], { id: 'x', address: '1.2.3.4:1', weight: -2 }] },
      'backends[1].weight: must be an integer in [1, 4294967295], got -2',
    ],
    [
      'wrong-typed field',
      { cluster: 'db', backends: [{ id: 'x', address: '1.2.3.4:1', priority: '1' }] },
      'backends[0].priority: must be an integer in [0, 4294967295], got "1"',
    ],
    [
      'duplicate id',
      { cluster: 'db', backends: [ok.backends[0], ok.backends[0]] },
      'backends[1].id: duplicate id "a" (first at backends[0])',
    ],
    ['bad address', { cluster: 'db', backends: [{ id: 'x', address: 'nohost' }] }, 'backends[0].address: must be "host:port"'],
    [
      'unknown backend field',
      { cluster: 'db', backends: [{ id: 'x', address: '1.2.3.4:1', wieght: 2 }] },
      'backends[0].wieght: unknown field',
    ],
    [
      'unknown top-level field',
      { ...ok, backend: [] },
      'backend: unknown field (accepted: cluster, version, backends, health, retryBudget, slowStart, connectionBudget)',
    ],
    [
      'missing cluster',
      { backends: [] },
      'cluster: must be 1 to 128 characters of [A-Za-z0-9._-], starting with a letter or digit, got undefined',
    ],
    ['cluster with a colon', { cluster: 'a:b', backends: [] }, 'cluster: must be 1 to 128 characters'],
    ['negative version', { ...ok, version: -1 }, 'version: must be an integer in [0, 9007199254740991], got -1'],
    ['fractional version', { ...ok, version: 1.5 }, 'version: must be an integer in [0, 9007199254740991], got 1.5'],
    ['backends not an array', { cluster: 'db', backends: {} }, 'backends: must be an array, got a object'],
    [
      'connectionBudget without a limit',
      { ...ok, connectionBudget: {} },
      'connectionBudget.limitPerBackend: must be an integer in [1, 1000000], got undefined',
    ],
    [
      'connectionBudget reserve at the limit',
      { ...ok, connectionBudget: { limitPerBackend: 40, reserve: 40 } },
      'connectionBudget.reserve: must be below connectionBudget.limitPerBackend (40), got 40',
    ],
    [
      'connectionBudget short TTL',
      { ...ok, connectionBudget: { limitPerBackend: 40, ttlMs: 10 } },
      'connectionBudget.ttlMs: must be an integer in [300, 3600000], got 10',
    ],
    ['connectionBudget unknown field', { ...ok, connectionBudget: { limit: 40 } }, 'connectionBudget.limit: unknown'],
    [
      'not an object',
      [1],
      'document: must be an object { cluster, version?, backends, health?, retryBudget?, slowStart?, connectionBudget? }, got an array',
    ],
    [
      'inconsistent locality weights',
      {
        cluster: 'db',
        backends: [
          { id: 'x', address: '1.2.3.4:1', locality: 'z1', localityWeight: 2 },
          { id: 'y', address: '1.2.3.4:2', locality: 'z1', localityWeight: 3 },
        ],
      },
      'backends[1].localityWeight: 3 contradicts 2 at backends[0]',
    ],
  ])('rejects %s naming the field', (_name, doc, expected) => {
    expect(message(() => resolveDocument(doc))).toContain(expected);
  });

  it('prefixes nested paths', () => {
    expect(
      message(() => resolveDocument({ cluster: 'db', backends: [{ id: 'x', address: '1.2.3.4:1', weight: 0 }] }, 'snapshot.document')),
    ).toBe('snapshot.document.backends[0].weight: must be an integer in [1, 4294967295], got 0');
  });

  it('parses JSON and YAML text and reports malformed text', () => {
    expect(parseDocument(JSON.stringify(ok)).backends).toHaveLength(2);
    const yaml = 'cluster: db\nversion: 2\nbackends:\n  - id: a\n    address: "10.0.0.1:5432"\n    weight: 5\n';
    const doc = parseDocument(yaml, { format: 'yaml' });
    expect(doc.version).toBe(2);
    expect(doc.backends[0]!.weight).toBe(5);
    expect(message(() => parseDocument('{"cluster": "db",'))).toMatch(/^document: malformed JSON \(/);
    expect(message(() => parseDocument('cluster: db\ncluster: x\nbackends: []\n', { format: 'yaml' }))).toMatch(
      /^document: malformed YAML \(/,
    );
  });

  it('refuses oversized text before parsing it', () => {
    const big = JSON.stringify({ cluster: 'db', backends: [] }) + ' '.repeat(2000);
    expect(message(() => parseDocument(big, { maxBytes: 1024 }))).toBe(`document: ${big.length} bytes exceeds the limit of 1024 bytes`);
    // Multi-byte characters count in UTF-8 bytes, not string length.
    const wide = `{"cluster":"db","backends":[],"x":"${'é'.repeat(400)}"}`;
    expect(message(() => parseDocument(wide, { maxBytes: 600 }))).toBe(
      `document: ${Buffer.byteLength(wide)} bytes exceeds the limit of 600 bytes`,
    );
  });

  it('compact form round-trips to the same resolved document (property)', () => {
    const spec = fc.record(
      {
        weight: fc.integer({ min: 1, max: 2 ** 32 - 1 }),
        priority: fc.integer({ min: 0, max: 5 }),
        status: fc.constantFrom('ready', 'draining', 'unavailable'),
        maxInflight: fc.integer({ min: 0, max: 1000 }),
        panicEligible: fc.boolean(),
      },
      { requiredKeys: [] },
    );
    fc.assert(
      fc.property(fc.array(spec, { maxLength: 20 }), (specs) => {
        const backends = specs.map((s, i) => ({ id: `b${i}`, address: `127.0.0.1:${1000 + i}`, ...s }));
        const resolved = resolveDocument({ cluster: 'c', backends });
        const again = resolveDocument(JSON.parse(documentJson(resolved)));
        expect(again.backends).toEqual(resolved.backends);
        for (const b of again.backends) expect(Object.keys(compactSpec(b)).length).toBeLessThanOrEqual(Object.keys(b).length);
      }),
    );
  });
});

describe('documentJson', () => {
  it('is exactly JSON.stringify of { cluster, compact backends, health?, retryBudget?, slowStart? }, for resolved (remembered) and plain specs, before and after a change (property)', () => {
    const spec = fc.record(
      {
        id: fc.string({ minLength: 1, maxLength: 8, unit: 'grapheme' }),
        weight: fc.integer({ min: 1, max: 2 ** 32 - 1 }),
        priority: fc.integer({ min: 0, max: 3 }),
        locality: fc.string({ maxLength: 6, unit: 'grapheme' }),
        status: fc.constantFrom('ready', 'draining', 'unavailable', 'degraded'),
        maxInflight: fc.integer({ min: 0, max: 1000 }),
        panicEligible: fc.boolean(),
      },
      { requiredKeys: ['id'] },
    );
    const reference = (doc: {
      cluster: string;
      backends: readonly ResolvedBackendSpec[];
      health?: HealthConfig;
      retryBudget?: unknown;
      slowStart?: unknown;
    }) =>
      JSON.stringify({
        cluster: doc.cluster,
        backends: doc.backends.map(compactSpec),
        ...(doc.health === undefined ? {} : { health: doc.health }),
        ...(doc.retryBudget === undefined ? {} : { retryBudget: doc.retryBudget }),
        ...(doc.slowStart === undefined ? {} : { slowStart: doc.slowStart }),
      });
    fc.assert(
      fc.property(
        fc.uniqueArray(spec, { selector: (s) => s.id, maxLength: 12 }),
        fc.stringMatching(/^[a-z0-9][a-z0-9._-]{0,9}$/),
        fc.integer({ min: 0, max: 7 }),
        fc.nat(),
        fc.integer({ min: 1, max: 100 }),
        (specs, cluster, blocks, at, weight) => {
          const backends = specs.map((s, i) => ({ ...s, address: `127.0.0.1:${1000 + i}` }));
          const health: HealthConfig | undefined = (blocks & 1) !== 0 ? { outlier: { maxEjectionPercent: 20 } } : undefined;
          const doc = resolveDocument({
            cluster,
            backends,
            ...(health === undefined ? {} : { health }),
            ...((blocks & 2) !== 0 ? { retryBudget: { ratio: 0.1 } } : {}),
            ...((blocks & 4) !== 0 ? { slowStart: { windowMs: 30_000, aggression: 2 } } : {}),
          });
          expect(documentJson(doc)).toBe(reference(doc));
          // Again (remembered per spec), after one backend changed, and with plain (not resolved) copies.
          expect(documentJson(doc)).toBe(reference(doc));
          if (doc.backends.length > 0) {
            const k = at % doc.backends.length;
            const next = { ...doc, backends: doc.backends.map((b, i) => (i === k ? resolveBackendSpec({ ...b, weight }) : b)) };
            expect(documentJson(next)).toBe(reference(next));
          }
          const plain = { ...doc, backends: doc.backends.map((b) => ({ ...b })) };
          expect(documentJson(plain)).toBe(reference(doc));
        },
      ),
      { numRuns: 500 },
    );
  });
});

describe('redis envelope', () => {
  const opts = { cluster: 'db', maxBytes: 1 << 20, what: 'notice' as const };
  const good = JSON.stringify({ version: 3, document: ok });

  it('names keys by prefix and cluster', () => {
    expect(membershipKeys('db', 'app')).toEqual({ snapshot: 'app:db:snapshot', channel: 'app:db:notices' });
    expect(message(() => membershipKeys('db', 'a b'))).toContain('prefix: must be 1 to 128 characters');
  });

  it('decodes a valid notice', () => {
    const env = decodeEnvelope(good, opts);
    expect(env.version).toBe(3);
    expect(env.document.backends.map((b) => b.id)).toEqual(['a', 'b']);
  });

  it.each([
    ['malformed JSON', '{"version":3,', /^notice: malformed JSON/],
    ['wrong cluster', JSON.stringify({ version: 3, document: { ...ok, cluster: 'other' } }), /^notice\.document\.cluster: must be "db"/],
    ['version 0', JSON.stringify({ version: 0, document: ok }), /^notice\.version: must be >= 1, got 0$/],
    ['string version', JSON.stringify({ version: '3', document: ok }), /^notice\.version: must be an integer .*got "3"$/],
    ['extra field', JSON.stringify({ version: 3, document: ok, x: 1 }), /^notice\.x: unknown field/],
    [
      'negative weight',
      JSON.stringify({ version: 3, document: { cluster: 'db', backends: [{ id: 'a', address: '1.1.1.1:1', weight: -2 }] } }),
      /^notice\.document\.backends\[0\]\.weight: must be an integer in \[1, 4294967295\], got -2$/,
    ],
  ])('rejects %s', (_n, text, expected) => {
    expect(message(() => decodeEnvelope(text, opts))).toMatch(expected);
  });

  it('refuses an oversized notice', () => {
    expect(message(() => decodeEnvelope(good, { ...opts, maxBytes: 64 }))).toBe(
      `notice: ${good.length} bytes exceeds the limit of 64 bytes`,
    );
  });
});

describe('parseDocument input', () => {
  it('refuses a non-string document and an unknown format, naming them', () => {
    expect(() => parseDocument(5 as never)).toThrow('document: must be a string of JSON or YAML, got 5');
    expect(() => parseDocument('{}', { format: 'xml' as never })).toThrow('options.format: must be "json" or "yaml", got "xml"');
  });
});
