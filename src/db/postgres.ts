/**
 * What a PostgreSQL server says about itself: the role query of a
 * `postgres` check with `roles: true` (one query that tells a primary from a
 * replica and reads a replica's lag and replay position, sent right after
 * the startup message: PostgreSQL reads it once authentication — trust, as
 * for every socket check — is done), the walk over the backend messages of
 * every postgres socket check, and what the reply means (a DbReport). Pure:
 * the socket is the probe's (health/probes.ts).
 */
import { parseLsnText } from './lsn.js';
import type { DbReport } from './report.js';

/**
 * The role query. Lag is 0 when the replica has replayed everything it
 * received — replay LSN at or past receive LSN (an idle primary commits
 * nothing, so `now() − pg_last_xact_replay_timestamp()` alone would grow
 * forever; and a restarted replica's walreceiver reports the start of the
 * WAL segment it resumed streaming from, behind what it had already
 * replayed, until new WAL arrives, so equality alone misses it) — else the
 * age of the last replayed commit; a replica that has replayed nothing yet
 * while behind reads as very far behind (1e12 ms, saturated in the table).
 * This one value is both what `maxLagMs` routes on and what the
 * `poise_backend_replication_lag_seconds` gauge shows (the same slot word).
 * CASE evaluates only the branch taken, so `pg_current_wal_lsn()` (an error
 * during recovery) never runs on a replica.
 */
export const PG_ROLE_SQL =
  'SELECT pg_is_in_recovery() AS in_recovery, ' +
  'CASE WHEN pg_is_in_recovery() THEN pg_last_wal_replay_lsn() ELSE pg_current_wal_lsn() END::text AS lsn, ' +
  '(CASE WHEN NOT pg_is_in_recovery() THEN 0 ' +
  'WHEN pg_last_wal_receive_lsn() IS NOT NULL AND pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn() THEN 0 ' +
  'ELSE COALESCE(EXTRACT(EPOCH FROM now() - pg_last_xact_replay_timestamp()) * 1000, 1e12) END)::float8 AS lag_ms';

/** A simple-protocol Query message ('Q', length, the text, NUL). */
export function queryMessage(sql: string): Buffer {
  const text = Buffer.from(`${sql}\0`, 'utf8');
  const msg = Buffer.alloc(5 + text.length);
  msg[0] = 0x51;
  msg.writeInt32BE(4 + text.length, 1);
  text.copy(msg, 5);
  return msg;
}

/** A DbReport from the query's three values as text (or what a client returned). */
export function dbReport(inRecovery: unknown, lsn: unknown, lagMs: unknown): DbReport {
  const replica = inRecovery === true || inRecovery === 't' || inRecovery === 'true';
  if (!replica && inRecovery !== false && inRecovery !== 'f' && inRecovery !== 'false') {
    throw new Error(`postgres: pg_is_in_recovery() returned ${JSON.stringify(inRecovery)}`);
  }
  const [lsnHi, lsnLo] = lsn === null || lsn === undefined ? [0, 0] : parseLsnText(String(lsn), 'postgres: the LSN');
  const lag = Number(lagMs);
  if (!Number.isFinite(lag) || lag < 0) throw new Error(`postgres: lag ${JSON.stringify(lagMs)} is not a number of ms`);
  return { role: replica ? 'replica' : 'primary', lagMs: replica ? lag : 0, lsnHi, lsnLo };
}

/**
 * Walks complete PostgreSQL backend messages in `buf`, handing each to `on`
 * (type byte, body start, body end) until it returns true (then true); false
 * while the reply is incomplete. An ErrorResponse ('E') or an
 * authentication request other than Ok (the check sends no password) throws,
 * naming it. The one message walk of every postgres socket check.
 */
export function walkPgMessages(buf: Buffer, on: (type: number, from: number, to: number) => boolean): boolean {
  let p = 0;
  while (p + 5 <= buf.length) {
    const type = buf[p]!;
    const len = buf.readInt32BE(p + 1);
    if (len < 4) throw new Error('postgres: malformed message length');
    if (p + 1 + len > buf.length) return false;
    if (type === 0x45) {
      // 'E' ErrorResponse: fields of (code byte, cstring); report the message ('M').
      const fields = buf
        .subarray(p + 5, p + 1 + len)
        .toString('utf8')
        .split('\0');
      const m = fields.find((f) => f.startsWith('M'));
      throw new Error(`postgres: ${m === undefined ? 'error response' : m.slice(1)}`);
    }
    if (type === 0x52 && len >= 8 && buf.readInt32BE(p + 5) !== 0) {
      throw new Error(
        `postgres: the server asks for authentication (method ${buf.readInt32BE(p + 5)}); use a trust rule or options.client`,
      );
    }
    if (on(type, p + 5, p + 1 + len)) return true;
    p += 1 + len;
  }
  return false;
}

/**
 * Reads the reply to startup + the role query: everything up to the first
 * ReadyForQuery (the startup), then RowDescription, one DataRow,
 * CommandComplete and the second ReadyForQuery. Returns the report once that
 * arrives, undefined while the reply is incomplete; throws as
 * {@link walkPgMessages}.
 */
export function pgRoleReply(buf: Buffer): DbReport | undefined {
  let ready = 0;
  let row: (string | null)[] | undefined;
  const done = walkPgMessages(buf, (type, from, to) => {
    if (type === 0x44) row = dataRow(buf, from, to);
    return type === 0x5a && ++ready === 2;
  });
  if (!done) return undefined;
  if (row === undefined || row.length !== 3) throw new Error('postgres: the role query returned no row');
  return dbReport(row[0], row[1], row[2]);
}

/** The columns of a DataRow body ([from, to)): int16 count, then per column int32 length (−1 = NULL) and the bytes. */
function dataRow(buf: Buffer, from: number, to: number): (string | null)[] {
  const n = buf.readInt16BE(from);
  const out: (string | null)[] = [];
  let p = from + 2;
  for (let k = 0; k < n; k++) {
    if (p + 4 > to) throw new Error('postgres: malformed DataRow');
    const len = buf.readInt32BE(p);
    p += 4;
    if (len < 0) out.push(null);
    else {
      if (p + len > to) throw new Error('postgres: malformed DataRow');
      out.push(buf.subarray(p, p + len).toString('utf8'));
      p += len;
    }
  }
  return out;
}

/** The report from a client's result (a pg `Client`/`Pool` returns `{ rows: [{ in_recovery, lsn, lag_ms }] }`). */
export function clientRoleReply(result: unknown): DbReport {
  const rows = (result as { rows?: unknown } | null)?.rows;
  const r = Array.isArray(rows) ? (rows[0] as Record<string, unknown> | undefined) : undefined;
  if (r === undefined || r === null || typeof r !== 'object') throw new Error('postgres: the role query returned no row');
  return dbReport(r['in_recovery'], r['lsn'], r['lag_ms']);
}
