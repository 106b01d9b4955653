import { describe, expect, it } from 'vitest';
import { parseLsnText } from '../../src/db/lsn.js';
import { mysqlReport } from '../../src/db/mysql.js';
import { clientRoleReply, dbReport, pgRoleReply, queryMessage } from '../../src/db/postgres.js';

/** A backend message: type byte, int32 length (itself included), body. */
function msg(type: string, body: Buffer): Buffer {
  const head = Buffer.alloc(5);
  head[0] = type.charCodeAt(0);
  head.writeInt32BE(4 + body.length, 1);
  return Buffer.concat([head, body]);
}
function dataRow(values: (string | null)[]): Buffer {
  const parts: Buffer[] = [Buffer.from([0, values.length])];
  for (const v of values) {
    const len = Buffer.alloc(4);
    len.writeInt32BE(v === null ? -1 : Buffer.byteLength(v), 0);
    parts.push(len, v === null ? Buffer.alloc(0) : Buffer.from(v));
  }
  return msg('D', Buffer.concat(parts));
}
const AUTH_OK = msg('R', Buffer.from([0, 0, 0, 0]));
const READY = msg('Z', Buffer.from('I'));

describe('the postgres roles reply', () => {
  it('reads role, lag and LSN from startup + query messages, only once the second ReadyForQuery is in', () => {
    const whole = Buffer.concat([
      AUTH_OK,
      READY,
      msg('T', Buffer.alloc(2)),
      dataRow(['t', '16/B374D848', '2500.5']),
      msg('C', Buffer.from('SELECT 1\0')),
      READY,
    ]);
    for (let cut = 0; cut < whole.length; cut++) expect(pgRoleReply(whole.subarray(0, cut))).toBeUndefined();
    expect(pgRoleReply(whole)).toEqual({ role: 'replica', lagMs: 2500.5, lsnHi: 0x16, lsnLo: 0xb374d848 });
    const primary = Buffer.concat([AUTH_OK, READY, dataRow(['f', '0/3000060', '0']), READY]);
    expect(pgRoleReply(primary)).toEqual({ role: 'primary', lagMs: 0, lsnHi: 0, lsnLo: 0x3000060 });
  });

  it('fails naming the reason: an error response, a password request, a reply without a row, a bad value', () => {
    const err = msg('E', Buffer.from('SERROR\0Mrecovery is in progress\0\0'));
    expect(() => pgRoleReply(Buffer.concat([AUTH_OK, READY, err]))).toThrow('postgres: recovery is in progress');
    expect(() => pgRoleReply(msg('R', Buffer.from([0, 0, 0, 5, 1, 2, 3, 4])))).toThrow(/asks for authentication \(method 5\)/);
    expect(() => pgRoleReply(Buffer.concat([AUTH_OK, READY, READY]))).toThrow('postgres: the role query returned no row');
    expect(() => dbReport('x', '0/0', '0')).toThrow('postgres: pg_is_in_recovery() returned "x"');
    expect(() => dbReport('t', 'zz', '0')).toThrow(/the LSN: must be an LSN/);
    expect(() => dbReport('t', '0/0', 'NaN')).toThrow(/is not a number of ms/);
  });

  it('a client result (pg returns booleans and text), the query message and LSN text', () => {
    expect(clientRoleReply({ rows: [{ in_recovery: true, lsn: '1/0', lag_ms: 12 }] })).toEqual({
      role: 'replica',
      lagMs: 12,
      lsnHi: 1,
      lsnLo: 0,
    });
    expect(() => clientRoleReply({ rows: [] })).toThrow('postgres: the role query returned no row');
    const q = queryMessage('SELECT 1');
    expect([q[0], q.readInt32BE(1), q.subarray(5).toString()]).toEqual([0x51, 13, 'SELECT 1\0']);
    expect(parseLsnText('FFFFFFFF/0')).toEqual([0xffffffff, 0]);
  });
});

describe('the mysql roles reply', () => {
  it('read_only decides the role; Seconds_Behind_Source / _Master the lag (NULL: far behind; no row: 0)', () => {
    const none = { columns: [], rows: [] };
    expect(mysqlReport('0', none)).toEqual({ role: 'primary', lagMs: 0, lsnHi: 0, lsnLo: 0 });
    expect(mysqlReport('1', none)).toEqual({ role: 'replica', lagMs: 0, lsnHi: 0, lsnLo: 0 });
    expect(mysqlReport('1', { columns: ['Slave_IO_State', 'Seconds_Behind_Master'], rows: [['x', '7']] }).lagMs).toBe(7000);
    expect(mysqlReport('1', { columns: ['Seconds_Behind_Source'], rows: [['3']] }).lagMs).toBe(3000);
    expect(mysqlReport('1', { columns: ['Seconds_Behind_Source'], rows: [[null]] }).lagMs).toBe(Number.POSITIVE_INFINITY);
    // A writable server is a primary whatever its replica status says.
    expect(mysqlReport('0', { columns: ['Seconds_Behind_Source'], rows: [['9']] }).lagMs).toBe(0);
  });
});
