/**
 * PostgreSQL's LSN (a WAL position) in the one text form the server prints,
 * `X/Y` (two hex numbers of 1 to 8 digits: the high and low 32 bits): read
 * from a server (`currentLsn`, the role probe's reply), from a caller
 * (`acquire({ minLsn })`), and compared as a pair of uint32 halves.
 */
import { PoiseError } from '../core/errors.js';

/** The text form of an LSN: `X/Y`, 1 to 8 hex digits each. */
const LSN_TEXT = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/;

/**
 * Parses `X/Y` into its halves; throws naming `field` and the text
 * otherwise (a probe's reply: the check fails with that message).
 */
export function parseLsnText(text: string, field = 'lsn'): [number, number] {
  const m = LSN_TEXT.exec(text);
  if (m === null) throw new Error(`${field}: must be an LSN "X/Y" (hex), got ${JSON.stringify(text.slice(0, 40))}`);
  return [Number.parseInt(m[1]!, 16), Number.parseInt(m[2]!, 16)];
}

/** A hex digit's value, or -1. */
function hexDigit(ch: number): number {
  if (ch >= 48 && ch <= 57) return ch - 48;
  if (ch >= 65 && ch <= 70) return ch - 55;
  if (ch >= 97 && ch <= 102) return ch - 87;
  return -1;
}

/**
 * Parses `X/Y` (1–8 hex digits each) into `out[0]`, `out[1]`; false (out
 * untouched) when malformed. The allocation-free form of
 * {@link parseLsnText}, for an acquire's `minLsn` (the same texts pass).
 */
export function parseLsnInto(s: string, out: Uint32Array): boolean {
  const n = s.length;
  let i = 0;
  let hi = 0;
  let digits = 0;
  for (; i < n; i++) {
    const d = hexDigit(s.charCodeAt(i));
    if (d < 0) break;
    if (++digits > 8) return false;
    hi = hi * 16 + d;
  }
  if (digits === 0 || i >= n || s.charCodeAt(i) !== 47) return false;
  let lo = 0;
  digits = 0;
  for (i++; i < n; i++) {
    const d = hexDigit(s.charCodeAt(i));
    if (d < 0 || ++digits > 8) return false;
    lo = lo * 16 + d;
  }
  if (digits === 0) return false;
  out[0] = hi;
  out[1] = lo;
  return true;
}

/** Anything with pg's `query(text)` (a `pg.Client`, `pg.PoolClient` or `pg.Pool`). */
export interface LsnClient {
  query(sql: string): Promise<{ rows: readonly unknown[] }>;
}

/**
 * Read-your-writes for PostgreSQL: the primary's current WAL position
 * (`pg_current_wal_lsn()`), as PostgreSQL prints it (`'16/B374D848'`), to
 * pass as `minLsn` to the next read (`router.acquire({ intent: 'read',
 * minLsn })` or `routedStream(router, { intent: 'read', minLsn })`): after a
 * commit, every replica whose replay LSN has reached it shows that commit.
 * Run it on the connection that wrote (a primary). Rejects with
 * `PoiseError` `InvalidConfig` when the server answers something else (a
 * replica raises its own error: recovery is in progress).
 *
 * @example
 * await writer.query('INSERT INTO t VALUES ($1)', [v]);
 * const lsn = await currentLsn(writer);
 * const lease = router.acquire({ intent: 'read', minLsn: lsn });
 */
export async function currentLsn(client: LsnClient): Promise<string> {
  const { rows } = await client.query('SELECT pg_current_wal_lsn()::text AS lsn');
  const lsn = (rows[0] as { lsn?: unknown } | undefined)?.lsn;
  if (typeof lsn !== 'string' || !LSN_TEXT.test(lsn)) {
    throw new PoiseError('InvalidConfig', `currentLsn: the server returned ${JSON.stringify(lsn)}, not an LSN "X/Y"`, { field: 'lsn' });
  }
  return lsn;
}
