/**
 * Read-your-writes for PostgreSQL: the LSN a write reached, to pass as
 * `minLsn` to the next read (`router.acquire({ intent: 'read', minLsn })` or
 * `routedStream(router, { intent: 'read', minLsn })`).
 */
import { PoiseError } from '../core/errors.js';

/** Anything with pg's `query(text)` (a `pg.Client`, `pg.PoolClient` or `pg.Pool`). */
export interface LsnClient {
  query(sql: string): Promise<{ rows: readonly unknown[] }>;
}

/**
 * The primary's current WAL position (`pg_current_wal_lsn()`), as
 * PostgreSQL prints it (`'16/B374D848'`): after a commit, every replica
 * whose replay LSN has reached it shows that commit. Run it on the
 * connection that wrote (a primary). Rejects with `PoiseError`
 * `InvalidConfig` when the server answers something else (a replica raises
 * its own error: recovery is in progress).
 *
 * @example
 * await writer.query('INSERT INTO t VALUES ($1)', [v]);
 * const lsn = await currentLsn(writer);
 * const lease = router.acquire({ intent: 'read', minLsn: lsn });
 */
export async function currentLsn(client: LsnClient): Promise<string> {
  const { rows } = await client.query('SELECT pg_current_wal_lsn()::text AS lsn');
  const lsn = (rows[0] as { lsn?: unknown } | undefined)?.lsn;
  if (typeof lsn !== 'string' || !/^[0-9A-F]{1,8}\/[0-9A-F]{1,8}$/i.test(lsn)) {
    throw new PoiseError('InvalidConfig', `currentLsn: the server returned ${JSON.stringify(lsn)}, not an LSN "X/Y"`, { field: 'lsn' });
  }
  return lsn;
}
