/**
 * The `mysql` check (MySQL, MariaDB): a full login in the client/server
 * protocol (HandshakeV10 → HandshakeResponse41 with an empty password, an
 * AuthSwitch answered empty), then, with `roles`, `SELECT @@read_only` and
 * `SHOW REPLICA STATUS` (falling back to `SHOW SLAVE STATUS` on servers that
 * do not know it), then COM_QUIT. Always a full login and a polite quit: a
 * client that leaves after the greeting counts toward the server's
 * `max_connect_errors` and gets the checking host blocked.
 *
 * What the role queries' replies mean (role, lag; no LSN) is db/mysql.ts's.
 * Owner thread only.
 */
import { connect, type Socket } from 'node:net';
import type { CheckTarget } from './config.js';
import { MYSQL_READ_ONLY_SQL, MYSQL_REPLICA_STATUS_SQL, type MysqlResultSet, mysqlReport } from '../db/mysql.js';
import type { DbReport } from '../db/report.js';

const CLIENT_LONG_PASSWORD = 0x1;
const CLIENT_PROTOCOL_41 = 0x200;
const CLIENT_SECURE_CONNECTION = 0x8000;
const CLIENT_PLUGIN_AUTH = 0x80000;
const CAPS = CLIENT_LONG_PASSWORD | CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION | CLIENT_PLUGIN_AUTH;
const MAX_READ = 256 * 1024;

/** Reads MySQL packets off a socket, one awaited at a time. */
class PacketReader {
  private buf = Buffer.alloc(0);
  private waiting: (() => void) | undefined;
  private failed: Error | undefined;

  constructor(sock: Socket) {
    sock.on('data', (chunk: Buffer) => {
      this.buf = Buffer.concat([this.buf, chunk]);
      if (this.buf.length > MAX_READ) this.fail(new Error(`mysql: reply longer than ${MAX_READ} bytes`));
      this.waiting?.();
    });
  }

  fail(err: Error): void {
    this.failed ??= err;
    this.waiting?.();
  }

  /** The next packet's payload and sequence number. */
  async next(): Promise<{ seq: number; payload: Buffer }> {
    for (;;) {
      if (this.failed !== undefined) throw this.failed;
      if (this.buf.length >= 4) {
        const len = this.buf.readUIntLE(0, 3);
        if (this.buf.length >= 4 + len) {
          const seq = this.buf[3]!;
          const payload = this.buf.subarray(4, 4 + len);
          this.buf = this.buf.subarray(4 + len);
          return { seq, payload };
        }
      }
      await new Promise<void>((resolve) => {
        this.waiting = resolve;
      });
      this.waiting = undefined;
    }
  }
}

function packet(seq: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(4);
  head.writeUIntLE(payload.length, 0, 3);
  head[3] = seq & 0xff;
  return Buffer.concat([head, payload]);
}

/** Throws the server's error message when `payload` is an ERR packet. */
function checkErr(payload: Buffer, what: string): void {
  if (payload[0] !== 0xff) return;
  // ERR: 0xff, code (2), '#' + SQL state (5), message.
  const msg = payload.subarray(payload[3] === 0x23 ? 9 : 3).toString('utf8');
  throw new Error(`mysql: ${what}: ${msg} (error ${payload.readUInt16LE(1)})`);
}

/** A length-encoded integer at `p`: its value and the position after it (value -1 for NULL, 0xfb). */
function lenenc(b: Buffer, p: number): [number, number] {
  const first = b[p]!;
  if (first < 0xfb) return [first, p + 1];
  if (first === 0xfb) return [-1, p + 1];
  if (first === 0xfc) return [b.readUInt16LE(p + 1), p + 3];
  if (first === 0xfd) return [b.readUIntLE(p + 1, 3), p + 4];
  return [Number(b.readBigUInt64LE(p + 1)), p + 9];
}

/** A length-encoded string at `p` (null for NULL) and the position after it. */
function lenencText(b: Buffer, p: number): [string | null, number] {
  const [n, q] = lenenc(b, p);
  if (n < 0) return [null, q];
  return [b.subarray(q, q + n).toString('utf8'), q + n];
}

/** The HandshakeResponse41 for `user` with an empty password, answering the server's greeting. */
function handshakeResponse(greeting: Buffer, user: string): Buffer {
  checkErr(greeting, 'the server refused the connection');
  if (greeting[0] !== 10) throw new Error(`mysql: greeting of protocol ${greeting[0]}, not 10`);
  const body = Buffer.alloc(32);
  body.writeUInt32LE(CAPS, 0);
  body.writeUInt32LE(0x0100_0000, 4);
  body[8] = 33; // utf8_general_ci
  return Buffer.concat([body, Buffer.from(`${user}\0`, 'utf8'), Buffer.from([0]), Buffer.from('mysql_native_password\0', 'latin1')]);
}

/** Runs one text-protocol query and reads its result set (OK packets give an empty one). */
async function query(sock: Socket, reader: PacketReader, sql: string): Promise<MysqlResultSet> {
  sock.write(packet(0, Buffer.concat([Buffer.from([0x03]), Buffer.from(sql, 'utf8')])));
  const head = (await reader.next()).payload;
  checkErr(head, sql);
  if (head[0] === 0x00) return { columns: [], rows: [] };
  const [count] = lenenc(head, 0);
  const columns: string[] = [];
  for (let k = 0; k < count; k++) {
    const def = (await reader.next()).payload;
    // Column definition 41: catalog, schema, table, org_table, name, ...
    let p = 0;
    let name: string | null = null;
    for (let f = 0; f < 5; f++) [name, p] = lenencText(def, p);
    columns.push(name ?? '');
  }
  // The EOF after the definitions (no CLIENT_DEPRECATE_EOF asked).
  let eof = (await reader.next()).payload;
  checkErr(eof, sql);
  const rows: (string | null)[][] = [];
  for (;;) {
    eof = (await reader.next()).payload;
    checkErr(eof, sql);
    if (eof[0] === 0xfe && eof.length < 9) break;
    const row: (string | null)[] = [];
    let p = 0;
    for (let k = 0; k < count; k++) {
      let v: string | null;
      [v, p] = lenencText(eof, p);
      row.push(v);
    }
    rows.push(row);
  }
  return { columns, rows };
}

/**
 * Logs in as `user`, runs the role queries when `roles`, quits. Resolves
 * with the report (undefined without `roles`); rejects on any failure.
 */
export function mysqlProbe(t: CheckTarget, signal: AbortSignal, user: string, roles: boolean): Promise<DbReport | undefined> {
  return new Promise<DbReport | undefined>((resolve, reject) => {
    if (signal.aborted) return reject(new Error('timed out'));
    const sock = connect({ host: t.host, port: t.port });
    const reader = new PacketReader(sock);
    const onAbort = (): void => reader.fail(new Error('timed out'));
    signal.addEventListener('abort', onAbort, { once: true });
    sock.once('error', (e) => reader.fail(e));
    sock.once('close', () => reader.fail(new Error('connection closed before a complete reply')));
    const run = async (): Promise<DbReport | undefined> => {
      const greeting = await reader.next();
      sock.write(packet(greeting.seq + 1, handshakeResponse(greeting.payload, user)));
      let reply = await reader.next();
      if (reply.payload[0] === 0xfe) {
        // AuthSwitchRequest: answer with the empty password's (empty) auth data.
        sock.write(packet(reply.seq + 1, Buffer.alloc(0)));
        reply = await reader.next();
      }
      checkErr(reply.payload, 'login');
      if (reply.payload[0] !== 0x00) throw new Error(`mysql: unexpected reply 0x${reply.payload[0]?.toString(16)} to the login`);
      let report: DbReport | undefined;
      if (roles) {
        const ro = await query(sock, reader, MYSQL_READ_ONLY_SQL);
        let status: MysqlResultSet;
        try {
          status = await query(sock, reader, MYSQL_REPLICA_STATUS_SQL[0]);
        } catch {
          status = await query(sock, reader, MYSQL_REPLICA_STATUS_SQL[1]);
        }
        report = mysqlReport(ro.rows[0]?.[0] ?? null, status);
      }
      // COM_QUIT: a polite goodbye, so the server never counts an aborted connect.
      sock.end(packet(0, Buffer.from([0x01])));
      return report;
    };
    run().then(
      (r) => {
        signal.removeEventListener('abort', onAbort);
        sock.destroy();
        resolve(r);
      },
      (err: Error) => {
        signal.removeEventListener('abort', onAbort);
        sock.destroy();
        reject(err);
      },
    );
  });
}
