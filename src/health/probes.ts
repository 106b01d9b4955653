/**
 * The probes behind active checks: one function per kind, each resolving a
 * {@link CheckVerdict} and rejecting on any failure (refused, reset, wrong
 * reply, aborted by the timeout signal). Owner thread only; never on a
 * routing path. Every socket is destroyed when the probe settles.
 */
import { http } from '../core/node-http.js';
import { connect, type Socket } from 'node:net';
import type { CheckTarget, CheckVerdict, ResolvedHealthCheck } from './config.js';
import { mysqlProbe } from './mysql-probe.js';
import { PG_ROLE_SQL, clientRoleReply, pgRoleReply, queryMessage, walkPgMessages } from '../db/postgres.js';
import type { DbReport } from '../db/report.js';

export type { DbReport } from '../db/report.js';

/** What an agent (HAProxy's agent protocol) said: the words it sent, read. */
export interface AgentReply {
  /** A weight percentage (`75%`): the share of the configured weight the backend asks for. */
  weightPercent: number | undefined;
  /** `ready`, `drain` or `maint`, when the reply named one. */
  admin: 'ready' | 'drain' | 'maint' | undefined;
  /** `up`, or `down` (also `failed`, `stopped`, `fail`), when the reply named one. */
  state: 'up' | 'down' | undefined;
  /** The text after `#`, if any (a down reason). */
  description: string | undefined;
}

/**
 * Reads an agent reply (HAProxy's `agent-check`): words separated by spaces,
 * tabs or commas, in any order — `<n>%`, `ready`, `drain`, `maint`, `up`,
 * `down` / `failed` / `stopped` / `fail`, `maxconn:<n>` (read, not used) —
 * then optionally `#` and a description. Throws on a word it does not know
 * or a reply with none (the check fails, as for a wrong reply of any kind).
 */
export function parseAgentReply(text: string): AgentReply {
  const hash = text.indexOf('#');
  const words = (hash < 0 ? text : text.slice(0, hash)).split(/[\s,]+/).filter((w) => w.length > 0);
  const reply: AgentReply = {
    weightPercent: undefined,
    admin: undefined,
    state: undefined,
    description: hash < 0 ? undefined : text.slice(hash + 1).trim(),
  };
  if (words.length === 0) throw new Error(`agent replied ${JSON.stringify(text.slice(0, 80))}: no word`);
  for (const raw of words) {
    const w = raw.toLowerCase();
    const pct = /^(\d{1,6})%$/.exec(w);
    if (pct !== null) reply.weightPercent = Number(pct[1]);
    else if (w === 'ready' || w === 'drain' || w === 'maint') reply.admin = w;
    else if (w === 'up') reply.state = 'up';
    else if (w === 'down' || w === 'failed' || w === 'stopped' || w === 'fail') reply.state = 'down';
    else if (!/^maxconn:\d+$/.test(w)) throw new Error(`agent replied ${JSON.stringify(raw.slice(0, 40))}: not an agent word`);
  }
  return reply;
}

/** The most a probe reads from a reply (an HTTP body, a Redis or PostgreSQL reply). */
const MAX_READ = 64 * 1024;

/** A verdict from a passing probe: degraded when it was slower than `degradedAfterMs`. */
function passed(c: ResolvedHealthCheck, startedMs: number, degraded = false): CheckVerdict {
  if (degraded) return 'degraded';
  return c.degradedAfterMs !== undefined && performance.now() - startedMs > c.degradedAfterMs ? 'degraded' : 'healthy';
}

/**
 * Runs one probe of `c` against `t`; `signal` aborts it (the timeout). An
 * agent check hands its reply to `onAgent` before its verdict: `down` fails
 * it, anything else passes. A postgres check with `roles` hands what it
 * read (role, lag, LSN) to `onDb` before its verdict.
 */
export function probe(
  c: ResolvedHealthCheck,
  t: CheckTarget,
  signal: AbortSignal,
  onAgent?: (reply: AgentReply) => void,
  onDb?: (report: DbReport) => void,
): Promise<CheckVerdict> {
  const started = performance.now();
  switch (c.kind) {
    case 'agent':
      return agentProbe(c, t, signal, started, onAgent);
    case 'tcp':
      return socketProbe(t, signal, undefined, () => true).then(() => passed(c, started));
    case 'redis':
      // RESP array form of PING; a healthy server answers the simple string +PONG.
      return socketProbe(t, signal, Buffer.from('*1\r\n$4\r\nPING\r\n'), (buf) => {
        if (buf.length < 7) return false;
        const line = buf.subarray(0, buf.indexOf(13)).toString('latin1');
        if (line === '+PONG') return true;
        throw new Error(`redis replied ${JSON.stringify(line.slice(0, 80))}, not +PONG`);
      }).then(() => passed(c, started));
    case 'postgres':
      return postgresProbe(c, t, signal, started, onDb);
    case 'mysql':
      return mysqlProbe(t, signal, c.user, c.roles).then((report) => {
        if (report !== undefined) onDb?.(report);
        return passed(c, started);
      });
    case 'http':
      return httpProbe(c, t, signal).then((degraded) => passed(c, started, degraded));
    case 'custom':
      return c.check!(t, signal).then((v) => {
        if (v === true || v === 'healthy') return passed(c, started);
        if (v === 'degraded') return 'degraded';
        throw new Error(`custom check returned ${JSON.stringify(v)}`);
      });
  }
}

/** An agent check's probe: reads the agent's one-line reply and hands it to `onAgent`; `down` fails it. */
function agentProbe(
  c: ResolvedHealthCheck,
  t: CheckTarget,
  signal: AbortSignal,
  started: number,
  onAgent: ((reply: AgentReply) => void) | undefined,
): Promise<CheckVerdict> {
  let text = '';
  const hello = c.agentSend === undefined ? undefined : Buffer.from(c.agentSend, 'latin1');
  const at = c.agentPort === undefined ? t : { ...t, port: c.agentPort };
  return socketProbe(
    at,
    signal,
    hello,
    (buf) => {
      const nl = buf.indexOf(10);
      if (nl < 0) return false;
      text = buf.subarray(0, nl).toString('latin1');
      return true;
    },
    undefined,
    (buf) => {
      text = buf.toString('latin1');
    },
  ).then(() => {
    const reply = parseAgentReply(text);
    onAgent?.(reply);
    if (reply.state === 'down') throw new Error(`agent reported down${reply.description ? `: ${reply.description}` : ''}`);
    return passed(c, started);
  });
}

/** A postgres check's probe: a login (and, with `roles`, the role query, its reply handed to `onDb`), through its client or a socket. */
function postgresProbe(
  c: ResolvedHealthCheck,
  t: CheckTarget,
  signal: AbortSignal,
  started: number,
  onDb: ((report: DbReport) => void) | undefined,
): Promise<CheckVerdict> {
  if (c.roles) {
    if (c.client !== undefined) {
      return c.client.query(PG_ROLE_SQL).then((result) => {
        onDb?.(clientRoleReply(result));
        return passed(c, started);
      });
    }
    // The query goes with the startup message (read after trust authentication); a full login and a Terminate.
    let report: DbReport | undefined;
    const hello = Buffer.concat([startupMessage(c.user, c.database), queryMessage(PG_ROLE_SQL)]);
    return socketProbe(
      t,
      signal,
      hello,
      (buf) => {
        report = pgRoleReply(buf);
        return report !== undefined;
      },
      TERMINATE,
    ).then(() => {
      onDb?.(report!);
      return passed(c, started);
    });
  }
  if (c.client !== undefined) return c.client.query('SELECT 1').then(() => passed(c, started));
  return socketProbe(t, signal, startupMessage(c.user, c.database), readyForQuery, TERMINATE).then(() => passed(c, started));
}

/**
 * Connects, writes `hello` (if any), and feeds everything read to `done`
 * until it returns true (the reply is complete and good) or throws (bad
 * reply). Writes `bye` before closing, when given.
 */
function socketProbe(
  t: CheckTarget,
  signal: AbortSignal,
  hello: Buffer | undefined,
  done: (buf: Buffer) => boolean,
  bye?: Buffer,
  atClose?: (buf: Buffer) => void,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    if (signal.aborted) return reject(new Error('timed out'));
    const sock: Socket = connect({ host: t.host, port: t.port });
    let buf = Buffer.alloc(0);
    let settled = false;
    const finish = (err?: Error): void => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      if (err === undefined && bye !== undefined) sock.end(bye);
      sock.destroy();
      if (err === undefined) resolve();
      else reject(err);
    };
    const onAbort = (): void => finish(new Error('timed out'));
    signal.addEventListener('abort', onAbort, { once: true });
    sock.once('error', (e) => finish(e));
    sock.once('close', () => {
      // A reply that ends with the connection (an agent may close instead of ending its line).
      if (atClose !== undefined && buf.length > 0) {
        atClose(buf);
        finish();
      } else finish(new Error('connection closed before a complete reply'));
    });
    sock.once('connect', () => {
      if (hello === undefined) {
        if (atClose === undefined) return finish();
        return;
      }
      sock.write(hello);
    });
    sock.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      try {
        if (done(buf)) finish();
        else if (buf.length > MAX_READ) finish(new Error(`reply longer than ${MAX_READ} bytes`));
      } catch (e) {
        finish(e as Error);
      }
    });
  });
}

/** PostgreSQL protocol 3.0 StartupMessage: length, 196608, then user/database pairs, a final NUL. */
function startupMessage(user: string, database: string): Buffer {
  const body = Buffer.from(`user\0${user}\0database\0${database}\0application_name\0poise-health\0\0`, 'utf8');
  const msg = Buffer.alloc(8 + body.length);
  msg.writeInt32BE(msg.length, 0);
  msg.writeInt32BE(196608, 4);
  body.copy(msg, 8);
  return msg;
}

/** Terminate ('X', length 4): a polite goodbye after ReadyForQuery. */
const TERMINATE = Buffer.from([0x58, 0, 0, 0, 4]);

/**
 * Walks backend messages: AuthenticationOk (R, 0), ParameterStatus,
 * BackendKeyData, NoticeResponse, then ReadyForQuery ('Z') = healthy
 * (db/postgres.ts's walk: an ErrorResponse or a password request fails).
 */
function readyForQuery(buf: Buffer): boolean {
  return walkPgMessages(buf, (type) => type === 0x5a);
}

/** GET the path; resolves whether the reply marks the backend degraded; rejects on a bad status or body. */
function httpProbe(c: ResolvedHealthCheck, t: CheckTarget, signal: AbortSignal): Promise<boolean> {
  return new Promise<boolean>((resolve, reject) => {
    const req = http.request(
      {
        host: t.host,
        port: t.port,
        path: c.path,
        method: 'GET',
        signal,
        agent: false,
        headers: { 'user-agent': 'poise-health', connection: 'close' },
      },
      (res) => {
        const status = res.statusCode ?? 0;
        const [lo, hi] = c.expectedStatus;
        if (status < lo || status > hi) {
          res.destroy();
          return reject(new Error(`http: status ${status} outside [${lo}, ${hi}]`));
        }
        const degraded = res.headers[c.degradedHeader] !== undefined;
        if (c.bodyIncludes === undefined) {
          res.resume();
          res.once('end', () => resolve(degraded));
          res.once('error', reject);
          return;
        }
        const want = c.bodyIncludes;
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (s: string) => {
          if (body.length < MAX_READ) body += s;
          if (body.includes(want)) {
            res.destroy();
            resolve(degraded);
          }
        });
        res.once('end', () =>
          body.includes(want) ? resolve(degraded) : reject(new Error(`http: body does not contain ${JSON.stringify(want)}`)),
        );
        res.once('error', reject);
      },
    );
    req.once('error', (e) => reject(signal.aborted ? new Error('timed out') : e));
    req.end();
  });
}
