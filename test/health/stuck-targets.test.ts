// One stuck target never delays another's verdict (issue 35): every
// owner-side poller is run beside a dripping target (it accepts and sends a
// byte every 150 ms, never finishing) and a silent one (it accepts and never
// answers), and a healthy target's verdict or weight must still change on
// time. The pollers run on a ManualTimers (their rounds and their deadlines),
// so "on time" is a point of the test's own clock; the real sockets are
// waited on by events (the verdict or the weight changing), never by time.
import { createServer as createHttpServer } from 'node:http';
import { type AddressInfo, connect, type Socket } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { ActiveChecker } from '../../src/health/active.js';
import { type HealthCheckOptions, resolveAgentCheck, resolveHealthCheck } from '../../src/health/config.js';
import { OrcaWeights, resolveOrca } from '../../src/health/orca.js';
import { newCounters } from '../../src/health/stats.js';
import type { HealthTarget } from '../../src/health/targets.js';
import { createLogger } from '../../src/log.js';
import { Balancer } from '../../src/runtime/balancer.js';
import { listenLoopback } from '../helpers/loopback.js';
import { ManualTimers } from '../helpers/manual-timers.js';
import { until } from '../helpers/until.js';

const cleanups: Array<() => unknown> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const silentLog = createLogger({ level: 'silent' });

/** A target that accepts and sends `prefix`, then `filler`, one byte every 150 ms (real time), never finishing. */
function dripping(prefix: string, filler = 'x'): Promise<number> {
  return listenLoopback(cleanups, (s) => {
    let k = 0;
    const tick = setInterval(() => {
      s.write(k < prefix.length ? prefix[k]! : filler);
      k++;
    }, 150);
    s.once('close', () => clearInterval(tick));
  });
}

/** A target that accepts and never answers. */
function silent(): Promise<number> {
  return listenLoopback(cleanups, () => {});
}

/** An HTTP server answering `answer()` (a status, or undefined: the request is held unanswered) on loopback. */
function httpServer(answer: () => number | undefined, header?: () => string): Promise<number> {
  const server = createHttpServer((_req, res) => {
    const status = answer();
    if (status === undefined) return;
    if (header !== undefined) res.setHeader('endpoint-load-metrics', header());
    res.statusCode = status;
    res.end();
  });
  return new Promise((resolve) => {
    server.listen(0, '127.0.0.1', () => {
      cleanups.push(
        () => new Promise<void>((r) => server.close(() => r())),
        () => server.closeAllConnections(),
      );
      resolve((server.address() as AddressInfo).port);
    });
  });
}

/** HealthTargets of every live backend of `b`, as the Balancer hands them to its pollers. */
function targetsOf(b: Balancer): HealthTarget[] {
  return b
    .slotEntries()
    .filter((e) => !e.removed)
    .map((e) => {
      const [host, port] = e.spec.address.split(':');
      return {
        slot: e.slot,
        generation: b.ownerTable.tag(e.slot) >>> 3,
        id: e.id,
        address: e.spec.address,
        host: host!,
        port: Number(port),
        priority: 0,
        role: 'none' as const,
      };
    });
}

describe('ORCA load endpoints beside a dripping and a silent one', () => {
  it('the healthy weights apply as they answer, the stuck polls end at their deadline, and a report expires at its round', async () => {
    let aUtilization = 0.5;
    let aAnswers = true;
    const ports = {
      a: await httpServer(
        () => (aAnswers ? 200 : undefined),
        () => `TEXT cpu_utilization=${aUtilization}, rps_fractional=100`,
      ),
      b: await httpServer(
        () => 200,
        () => 'TEXT cpu_utilization=0.25, rps_fractional=100',
      ),
      drip: await dripping('HTTP/1.1 200 OK\r\nx-drip: ', 'a'),
      silent: await silent(),
    };
    const timers = new ManualTimers(1000);
    const b = new Balancer({ capacity: 8, clock: () => timers.now(), logger: silentLog });
    cleanups.push(() => b.close());
    b.update(Object.entries(ports).map(([id, port]) => ({ id, address: `127.0.0.1:${port}` })));
    const o = resolveOrca({ intervalMs: 1000, timeoutMs: 500, blackoutMs: 0, expiryMs: 3000 }, 'health.orca');
    const orca = new OrcaWeights(b.ownerTable, o, silentLog, () => timers.now(), timers);
    cleanups.push(() => orca.close());
    orca.sync(targetsOf(b));
    const slot = (id: string): number => b.slotEntries().find((e) => e.id === id)!.slot;
    const multiplier = (id: string): number => b.ownerTable.reported.orcaMultiplier(slot(id));
    const near = (x: number, y: number): boolean => Math.abs(x - y) < 1e-5;

    orca.start();
    // Round 1 (t = 1000): a (weight 200) and b (400) answer; drip and silent get the mean (300).
    await timers.advance(0);
    await until(() => near(multiplier('a'), 2 / 3) && near(multiplier('b'), 4 / 3), 'the weights of a and b, applied while two polls hang');
    expect(orca.counts).toEqual({ reports: 2, refused: 0 });
    expect(near(multiplier('drip'), 1) && near(multiplier('silent'), 1)).toBe(true);
    // Their deadline (500 ms from the start of the poll: connect, headers and body) ends both stuck polls.
    await timers.advance(500);
    await until(() => orca.counts.refused === 2, 'the dripping and the silent poll cut off at their deadline');

    // Round 2 (t = 2000): a reports 800; it follows at once, whatever the stuck two do.
    aUtilization = 0.125;
    await timers.advance(500);
    await until(() => near(multiplier('a'), 4 / 3), "a's new weight");
    expect(near(multiplier('b'), 2 / 3)).toBe(true);
    await until(() => orca.counts.reports === 4, 'b answered round 2');

    // a goes quiet: its report of t = 2000 stays in force while younger than 3000 ms, and expires at round 5 (t = 5000).
    aAnswers = false;
    for (const [round, inForce] of [
      [3, true],
      [4, true],
      [5, false],
      [6, false],
    ] as const) {
      const reports = orca.counts.reports;
      await timers.advance(1000);
      expect(timers.now()).toBe(round * 1000);
      // The expiry is applied when the round starts, before any poll of it has answered.
      expect(near(multiplier('a'), inForce ? 4 / 3 : 1), `a's weight at round ${round}`).toBe(true);
      await until(() => orca.counts.reports === reports + 1, `b answered round ${round}`);
      // a now gets the mean of those in force: b's alone, so everyone is even.
      expect(near(multiplier('a'), inForce ? 4 / 3 : 1), `a's weight after b's answer of round ${round}`).toBe(true);
    }
    expect(b.ownerTable.reported.orcaWeight(slot('drip')) !== undefined).toBe(true);
    // Every stuck poll ended at its deadline, one per target and round (drip and silent in rounds 1 to 5, a in 3 to 5;
    // round 6's are still running): a hung backend is never polled twice at once.
    await until(() => orca.counts.refused === 13, 'every stuck poll of rounds 1 to 5 refused');
  });
});

describe("the Balancer's ORCA rounds on real timers", () => {
  it('pollLoadReports() ends with a dripping and a silent endpoint: their polls end at the deadline, the healthy weights are written', async () => {
    const ports = {
      a: await httpServer(
        () => 200,
        () => 'TEXT cpu_utilization=0.5, rps_fractional=100',
      ),
      b: await httpServer(
        () => 200,
        () => 'TEXT cpu_utilization=0.25, rps_fractional=100',
      ),
      drip: await dripping('HTTP/1.1 200 OK\r\nx-drip: ', 'a'),
      silent: await silent(),
    };
    let now = 1000;
    // The load endpoint drips faster than the deadline: an idle timeout would never end this round.
    const b = new Balancer({ capacity: 8, clock: () => now, logger: silentLog, health: { orca: { timeoutMs: 400, blackoutMs: 0 } } });
    cleanups.push(() => b.close());
    b.update(Object.entries(ports).map(([id, port]) => ({ id, address: `127.0.0.1:${port}` })));
    await b.pollLoadReports();
    now += 1000;
    await b.pollLoadReports();
    const slot = (id: string): number => b.slotEntries().find((e) => e.id === id)!.slot;
    expect(b.ownerTable.reported.orcaMultiplier(slot('a'))).toBeCloseTo(2 / 3, 5);
    expect(b.ownerTable.reported.orcaMultiplier(slot('b'))).toBeCloseTo(4 / 3, 5);
  });
});

/** A PostgreSQL backend message: type byte, int32 length (itself included), body. */
function pgMessage(type: string, body: Buffer | string): Buffer {
  const b = typeof body === 'string' ? Buffer.from(body) : body;
  const head = Buffer.alloc(5);
  head[0] = type.charCodeAt(0);
  head.writeInt32BE(4 + b.length, 1);
  return Buffer.concat([head, b]);
}
const PG_AUTH_OK = pgMessage('R', Buffer.alloc(4));
const PG_READY = pgMessage('Z', 'I');

/** The role query's reply: one DataRow (in_recovery, lsn, lag_ms) between the messages around it. */
function pgRoleRow(replica: boolean): Buffer {
  const cols = [replica ? 't' : 'f', '0/16B3748', '0'];
  const parts: Buffer[] = [Buffer.from([0, cols.length])];
  for (const c of cols) {
    const len = Buffer.alloc(4);
    len.writeInt32BE(c.length, 0);
    parts.push(len, Buffer.from(c));
  }
  return Buffer.concat([pgMessage('T', Buffer.alloc(2)), pgMessage('D', Buffer.concat(parts)), pgMessage('C', 'SELECT 1\0'), PG_READY]);
}

/** A MySQL packet: 3-byte length, sequence number, payload. */
function myPacket(seq: number, payload: Buffer): Buffer {
  const head = Buffer.alloc(4);
  head.writeUIntLE(payload.length, 0, 3);
  head[3] = seq;
  return Buffer.concat([head, payload]);
}
const MY_OK = Buffer.from([0, 0, 0, 2, 0, 0, 0]);
const MY_EOF = Buffer.from([0xfe, 0, 0, 2, 0]);
const lenencStr = (v: string): Buffer => Buffer.concat([Buffer.from([v.length]), Buffer.from(v)]);

/**
 * A MySQL server enough for the check: a greeting, the login answered OK
 * (or refused when `refuse()`), `SELECT @@read_only` answered `readOnly()`,
 * `SHOW REPLICA STATUS` answered with no row, COM_QUIT closes.
 */
function mysqlServer(s: Socket, refuse: () => boolean, readOnly: () => boolean): void {
  s.write(myPacket(0, Buffer.concat([Buffer.from([10]), Buffer.from('poise-test\0')])));
  let buf = Buffer.alloc(0);
  let loggedIn = false;
  s.on('data', (chunk: Buffer) => {
    buf = Buffer.concat([buf, chunk]);
    while (buf.length >= 4 && buf.length >= 4 + buf.readUIntLE(0, 3)) {
      const payload = buf.subarray(4, 4 + buf.readUIntLE(0, 3));
      const seq = buf[3]!;
      buf = buf.subarray(4 + payload.length);
      if (!loggedIn) {
        loggedIn = true;
        s.write(myPacket(seq + 1, refuse() ? Buffer.concat([Buffer.from([0xff, 0x15, 0x04]), Buffer.from('#28000Access denied')]) : MY_OK));
      } else if (payload[0] === 0x01) s.end();
      else if (payload.subarray(1).toString() === 'SELECT @@read_only') {
        const def = Buffer.concat(['def', '', '', '', '@@read_only', ''].map(lenencStr));
        s.write(
          Buffer.concat([
            myPacket(1, Buffer.from([1])),
            myPacket(2, def),
            myPacket(3, MY_EOF),
            myPacket(4, lenencStr(readOnly() ? '1' : '0')),
            myPacket(5, MY_EOF),
          ]),
        );
      } else s.write(myPacket(1, MY_OK));
    }
  });
}

/** A custom check that reads one line from the target and passes on `ok` (it ignores the abort signal: the worst a user may write). */
function lineCheck(t: { host: string; port: number }): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const sock = connect({ host: t.host, port: t.port });
    let text = '';
    sock.on('data', (d: Buffer) => {
      text += d.toString('latin1');
      const nl = text.indexOf('\n');
      if (nl < 0) return;
      sock.destroy();
      if (text.slice(0, nl) === 'ok') resolve(true);
      else reject(new Error(`replied ${text.slice(0, nl)}`));
    });
    sock.on('error', reject);
    sock.on('close', () => reject(new Error('closed')));
  });
}

const roleNames = ['unknown', 'primary', 'replica'];

/**
 * One case per active poller: `check` is the health check, `healthy` the
 * target whose reply follows `flipped()` (false, true, then false again),
 * `read` the verdict the test watches (`initial` before any reply, `stuck`
 * once a hung check has reached its deadline, `verdicts` for the healthy
 * target's two replies), `drip` what the dripping target sends first (its
 * filler is `x`), `dripEnds` when the probe refuses a dripped reply by
 * itself before the deadline (Redis: any 7 bytes decide).
 */
interface Case {
  name: string;
  check: HealthCheckOptions | { agent: true };
  healthy: (flipped: () => boolean) => Promise<number>;
  read: 'check' | 'role' | 'weight';
  initial: string;
  stuck: string;
  verdicts: readonly [string, string];
  drip?: string;
  dripEnds?: boolean;
}

const onEachConnection = (reply: (s: Socket) => void): Promise<number> => listenLoopback(cleanups, reply);

/** What a check's verdict reads: up, then down (the healthy target's reply flipped to a failure). */
const UP_DOWN = { read: 'check', initial: 'unchecked', stuck: 'down', verdicts: ['up', 'down'] } as const;
/** What a roles check reads: the check and the role word (the healthy target turns from primary to replica). */
const ROLES = { read: 'role', initial: 'unchecked/unknown', stuck: 'down/unknown', verdicts: ['up/primary', 'up/replica'] } as const;

const cases: Case[] = [
  {
    name: 'http',
    check: { kind: 'http' },
    healthy: (flipped) => httpServer(() => (flipped() ? 503 : 200)),
    ...UP_DOWN,
    drip: 'HTTP/1.1 200 OK\r\nx-drip: ',
  },
  {
    name: 'redis',
    check: { kind: 'redis' },
    healthy: (flipped) => onEachConnection((s) => s.once('data', () => s.write(flipped() ? '-LOADING\r\n' : '+PONG\r\n'))),
    ...UP_DOWN,
    drip: '+PONG',
    dripEnds: true,
  },
  {
    name: 'postgres',
    check: { kind: 'postgres' },
    healthy: (flipped) =>
      onEachConnection((s) =>
        s.once('data', () =>
          s.write(flipped() ? pgMessage('E', 'SFATAL\0Mthe database system is starting up\0\0') : Buffer.concat([PG_AUTH_OK, PG_READY])),
        ),
      ),
    ...UP_DOWN,
  },
  {
    name: 'postgres roles (the database role probe)',
    check: { kind: 'postgres', roles: true },
    healthy: (flipped) =>
      onEachConnection((s) => s.once('data', () => s.write(Buffer.concat([PG_AUTH_OK, PG_READY, pgRoleRow(flipped())])))),
    ...ROLES,
  },
  {
    name: 'mysql',
    check: { kind: 'mysql' },
    healthy: (flipped) => onEachConnection((s) => mysqlServer(s, flipped, () => false)),
    ...UP_DOWN,
  },
  {
    name: 'mysql roles (the database role probe)',
    check: { kind: 'mysql', roles: true },
    healthy: (flipped) => onEachConnection((s) => mysqlServer(s, () => false, flipped)),
    ...ROLES,
  },
  {
    name: 'custom (a check that ignores the abort signal)',
    check: { kind: 'custom', check: lineCheck },
    healthy: (flipped) => onEachConnection((s) => s.end(flipped() ? 'no\n' : 'ok\n')),
    ...UP_DOWN,
  },
  {
    name: 'agent (as the check)',
    check: { kind: 'agent' },
    healthy: (flipped) => onEachConnection((s) => s.end(flipped() ? 'down # flipped\n' : 'up 100%\n')),
    ...UP_DOWN,
  },
  {
    name: 'agent beside the check (HAProxy agent-check: weights; a hung agent changes nothing)',
    check: { agent: true },
    healthy: (flipped) => onEachConnection((s) => s.end(flipped() ? '50%\n' : '25%\n')),
    read: 'weight',
    initial: '1',
    stuck: '1',
    verdicts: ['0.25', '0.5'],
  },
];

describe('active checks beside a dripping and a silent target', () => {
  it.each(cases)("$name: the healthy target's verdict changes at its own rounds while the other two hang", async (c) => {
    let flipped = false;
    const ports = {
      healthy: await c.healthy(() => flipped),
      drip: await dripping(c.drip ?? ''),
      silent: await silent(),
    };
    const timers = new ManualTimers(1000);
    const b = new Balancer({ capacity: 8, clock: () => timers.now(), logger: silentLog });
    cleanups.push(() => b.close());
    b.update(Object.entries(ports).map(([id, port]) => ({ id, address: `127.0.0.1:${port}` })));
    const schedule = { intervalMs: 1000, timeoutMs: 500, jitterPercent: 0 };
    const beside = 'agent' in c.check;
    const config = beside
      ? resolveAgentCheck(schedule, 'health.agent')
      : resolveHealthCheck({ ...(c.check as HealthCheckOptions), ...schedule, rise: 1, fall: 1 }, 'health.check');
    const checker = new ActiveChecker(b.ownerTable, config, silentLog, newCounters(), () => timers.now(), beside, timers);
    cleanups.push(() => checker.close());
    checker.sync(targetsOf(b));
    const slot = (id: string): number => b.slotEntries().find((e) => e.id === id)!.slot;
    const read = (id: string): string => {
      if (c.read === 'weight') return String(b.ownerTable.reported.agentMultiplier(slot(id)));
      const check = checker.stateOf(id)!.check;
      return c.read === 'check' ? check : `${check}/${roleNames[b.ownerTable.db.role(slot(id))]}`;
    };

    // t = 1001: the first checks of all three start; the healthy one's verdict lands while the others hang.
    await timers.advance(1);
    await until(() => read('healthy') === c.verdicts[0], `the healthy target's first verdict (${c.verdicts[0]})`);
    expect(read('silent')).toBe(c.initial);
    if (c.dripEnds !== true) expect(read('drip')).toBe(c.initial);
    // t = 1501: the deadline of the hung checks (500 ms from their start, whatever dripped in between).
    await timers.advance(500);
    await until(() => read('silent') === c.stuck && read('drip') === c.stuck, 'the hung checks ended at their deadline');

    // t = 2001: the healthy target's second round sees its new reply; t = 3001: its third, the first reply again.
    flipped = true;
    await timers.advance(500);
    await until(() => read('healthy') === c.verdicts[1], `the healthy target's second verdict (${c.verdicts[1]})`);
    flipped = false;
    await timers.advance(1000);
    await until(() => read('healthy') === c.verdicts[0], `the healthy target's third verdict (${c.verdicts[0]})`);
    expect(read('silent')).toBe(c.stuck);
    expect(read('drip')).toBe(c.stuck);
  });
});
