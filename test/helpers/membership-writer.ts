/** Failover test helpers: a continuous writer, and the "every reader converged" law. */
import { expect } from 'vitest';
import { isPoiseError } from '../../src/core/errors.js';
import type { MembershipSnapshot, ResolvedBackendSpec } from '../../src/core/spec.js';
import { compactSpec } from '../../src/core/spec-fields.js';
import type { MembershipPublisher, StoredMembership } from '../../src/membership/redis-publisher.js';
import type { RedisMembership } from '../../src/membership/redis-source.js';
import type { CapturedLog } from './log-capture.js';
import { until } from './until.js';

/** A started reader and what it delivered. */
export interface Reader {
  source: RedisMembership;
  seen: MembershipSnapshot[];
  log: CapturedLog;
}

/**
 * Every reader reaches the stored version with the stored document (field by
 * field), having applied strictly increasing versions; with `resubscribed`,
 * each also subscribed again after its first subscription (it followed a
 * failover). Returns the stored membership.
 */
export async function converged(
  readers: readonly Reader[],
  pub: MembershipPublisher,
  opts: { deadlineMs?: number; resubscribed?: boolean } = {},
): Promise<StoredMembership> {
  const stored = (await pub.show())!;
  for (const [i, r] of readers.entries()) {
    await until(
      () => r.source.version === stored.version,
      `reader ${i} at the stored version ${stored.version}`,
      opts.deadlineMs ?? 20_000,
    ).catch((err) => {
      // The reader's last log lines say where it stopped (connection, subscription, snapshot read).
      const tail = r.log.records.slice(-15).map((x) => `${x['msg']} ${JSON.stringify(x['err'] ?? x['version'] ?? '')}`);
      throw new Error(`${(err as Error).message} (held ${r.source.version}); last log lines:\n${tail.join('\n')}`);
    });
    // The whole document, field by field (deltas are applied to the held document; a wrong one would show here).
    expect(r.seen.at(-1)!.backends.map((b) => compactSpec(b as ResolvedBackendSpec))).toEqual(stored.document.backends);
    const versions = r.seen.map((s) => s.version);
    expect(versions).toEqual([...versions].sort((a, b) => a - b));
    expect(new Set(versions).size).toBe(versions.length);
    if (opts.resubscribed === true) expect(r.log.find('subscribed; reading the snapshot').length).toBeGreaterThan(1);
  }
  return stored;
}

/** Writes add(prefix<i>) back to back until stopped; records what was acknowledged and what was reported failed. */
export function writer(pub: MembershipPublisher, prefix: string) {
  const acked: { id: string; version: number; at: number }[] = [];
  const failed: { id: string; code: string }[] = [];
  let stop = false;
  const done = (async () => {
    for (let i = 0; !stop; i++) {
      const id = `${prefix}${i}`;
      try {
        const version = await pub.add({ id, address: `127.0.0.1:${1000 + (i % 50000)}` });
        acked.push({ id, version, at: Date.now() });
      } catch (err) {
        failed.push({ id, code: isPoiseError(err) ? err.code : String(err) });
        await new Promise((r) => setTimeout(r, 20));
      }
    }
  })();
  return {
    acked,
    failed,
    async stop() {
      stop = true;
      await done;
    },
  };
}
