/** What a database role check learned about a server (PostgreSQL: postgres.ts; MySQL, MariaDB: mysql.ts). */
export interface DbReport {
  /** `primary` (PostgreSQL: not in recovery; MySQL: not read-only) or `replica`. */
  role: 'primary' | 'replica';
  /** Replay lag, ms; 0 on a primary and on a replica that has replayed all it received. */
  lagMs: number;
  /** A primary's current WAL LSN, a replica's replay LSN: high and low 32 bits (0 and 0 on MySQL, which has none). */
  lsnHi: number;
  lsnLo: number;
}
