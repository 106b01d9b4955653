/**
 * What a MySQL or MariaDB server says about itself: the role queries of a
 * `mysql` check with `roles: true` and what their replies mean (a
 * DbReport). Pure: the login, the socket and the wire are the probe's
 * (health/mysql-probe.ts).
 *
 * Role: `@@read_only = 1` is a replica, 0 a primary. Lag:
 * `Seconds_Behind_Source` (`_Master`) × 1000; no replica status row is 0;
 * NULL (replication stopped) reads as far behind. MySQL has no LSN for
 * `minLsn`: its LSN words stay 0, so a read with `minLsn` goes to a primary.
 */
import type { DbReport } from './report.js';

/** One result set of the text protocol: column names and rows of text (null = SQL NULL). */
export interface MysqlResultSet {
  columns: string[];
  rows: (string | null)[][];
}

/** The role query: one row, one column, `1` / `ON` on a replica. */
export const MYSQL_READ_ONLY_SQL = 'SELECT @@read_only';

/**
 * The replica status queries, in the order to try: `SHOW REPLICA STATUS`,
 * then `SHOW SLAVE STATUS` on servers that do not know the first.
 */
export const MYSQL_REPLICA_STATUS_SQL = ['SHOW REPLICA STATUS', 'SHOW SLAVE STATUS'] as const;

/** The role and lag of a server from `@@read_only` and its replica status. */
export function mysqlReport(readOnly: string | null, status: MysqlResultSet): DbReport {
  const replica = readOnly === '1' || readOnly === 'ON';
  let lagMs = 0;
  const row = status.rows[0];
  if (row !== undefined) {
    const k = status.columns.findIndex((c) => c === 'Seconds_Behind_Source' || c === 'Seconds_Behind_Master');
    const v = k < 0 ? null : row[k]!;
    lagMs = v === null ? Number.POSITIVE_INFINITY : Number(v) * 1000;
  }
  return { role: replica ? 'replica' : 'primary', lagMs: replica ? lagMs : 0, lsnHi: 0, lsnLo: 0 };
}
