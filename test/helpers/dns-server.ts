/**
 * A real DNS server for tests: `dnsmasq` on a free loopback port, serving
 * the A/AAAA records of a hosts file the test rewrites (`setHosts`: the
 * file is rewritten and dnsmasq re-reads it on SIGHUP) and the SRV records
 * it was started with (dnsmasq reads `--srv-host` only at start). Names in
 * `test.` are local: an unknown one is NXDOMAIN; a name given in `names`
 * exists (a TXT record) even with no address, so it answers NODATA (an
 * empty A/AAAA set) rather than NXDOMAIN.
 *
 * In front of it, on its own port, a fault switch (`fault`): `'none'`
 * relays each UDP query to dnsmasq and its answer back; `'servfail'`
 * answers every query at once with the query's header marked as a
 * response with RCODE 2 (SERVFAIL), as a failing recursive server does;
 * `'drop'` answers nothing (a timeout). Point a source at `server` (the
 * switch); `direct` is dnsmasq itself.
 *
 * Every dnsmasq started here is SIGKILLed when the test process exits;
 * call `stop()` anyway.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import dgram from 'node:dgram';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import dns from 'node:dns';
import { freePort } from './ports.js';
import { until } from './until.js';

const live = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of live) child.kill('SIGKILL');
});

/** What the switch in front of dnsmasq does (see the file comment). */
export type DnsFault = 'none' | 'servfail' | 'drop';

/** One host line: a name and its addresses (IPv4 and/or IPv6). */
export type HostRecords = Record<string, readonly string[]>;

/** Options of {@link startDnsServer}. */
export interface DnsServerOptions {
  /** Initial A/AAAA records: name → addresses. */
  hosts?: HostRecords;
  /** Names that exist without an address (NODATA when they have none). */
  names?: readonly string[];
  /** SRV records: `service,target,port,priority,weight` (dnsmasq's `--srv-host`). */
  srv?: readonly string[];
  /** Records with a TTL of their own: `name,address[,address],ttl` (dnsmasq's `--host-record`; read only at start). */
  hostRecords?: readonly string[];
  /** TTL of every other local answer (the hosts file, SRV), seconds; default 5. */
  ttl?: number;
}

/** A running test DNS server. */
export interface TestDns {
  /** The fault switch, `127.0.0.1:port`: what a source should ask. */
  readonly server: string;
  /** dnsmasq itself, `127.0.0.1:port`. */
  readonly direct: string;
  /** The switch's mode; set it at any time. */
  fault: DnsFault;
  /** Queries the switch has received (every mode). */
  readonly queries: number;
  /** Rewrites the hosts file and has dnsmasq re-read it; resolves once dnsmasq answers `probe` as the new file says. */
  setHosts(hosts: HostRecords, probe?: string): Promise<void>;
  /** Kills dnsmasq and the switch, removes the directory. Idempotent. */
  stop(): Promise<void>;
}

function hostsText(hosts: HostRecords): string {
  return Object.entries(hosts)
    .flatMap(([name, addresses]) => addresses.map((a) => `${a} ${name}`))
    .join('\n')
    .concat('\n');
}

/** The sorted A and AAAA addresses dnsmasq answers for `name` (none for NODATA / NXDOMAIN). */
async function addressesOf(server: string, name: string): Promise<string[]> {
  const r = new dns.promises.Resolver({ timeout: 500, tries: 1 });
  r.setServers([server]);
  const of = async (ask: Promise<string[]>): Promise<string[]> => ask.catch(() => []);
  return [...(await of(r.resolve4(name))), ...(await of(r.resolve6(name)))].sort();
}

/** Starts dnsmasq (and the fault switch in front of it) on free loopback ports. */
export async function startDnsServer(opts: DnsServerOptions = {}): Promise<TestDns> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'poise-dns-'));
  const hostsFile = path.join(dir, 'hosts');
  writeFileSync(hostsFile, hostsText(opts.hosts ?? {}));
  const port = await freePort();
  const args = [
    '--no-daemon',
    `--port=${port}`,
    '--listen-address=127.0.0.1',
    '--bind-interfaces',
    '--no-resolv',
    '--no-hosts',
    `--addn-hosts=${hostsFile}`,
    `--local-ttl=${opts.ttl ?? 5}`,
    '--local=/test/',
    '--conf-file=/dev/null',
    ...(opts.names ?? []).map((n) => `--txt-record=${n},exists`),
    ...(opts.srv ?? []).map((s) => `--srv-host=${s}`),
    ...(opts.hostRecords ?? []).map((r) => `--host-record=${r}`),
  ];
  const child = spawn('dnsmasq', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  live.add(child);
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const direct = `127.0.0.1:${port}`;

  // The switch: one UDP socket in front, one towards dnsmasq per query.
  const front = dgram.createSocket('udp4');
  await new Promise<void>((resolve) => front.bind(0, '127.0.0.1', () => resolve()));
  const state = { fault: 'none' as DnsFault, queries: 0 };
  const relays = new Set<dgram.Socket>();
  front.on('message', (msg, rinfo) => {
    state.queries++;
    if (state.fault === 'drop' || msg.length < 12) return;
    if (state.fault === 'servfail') {
      const reply = Buffer.from(msg);
      reply[2] = 0x80 | (msg[2]! & 0x79); // QR = 1, opcode and RD kept
      reply[3] = 0x80 | 2; // RA = 1, RCODE 2: SERVFAIL
      reply.writeUInt16BE(0, 6); // no answer, authority or additional records
      reply.writeUInt16BE(0, 8);
      reply.writeUInt16BE(0, 10);
      front.send(reply.subarray(0, questionEnd(reply)), rinfo.port, rinfo.address);
      return;
    }
    const relay = dgram.createSocket('udp4');
    relays.add(relay);
    relay.on('message', (answer) => {
      front.send(answer, rinfo.port, rinfo.address);
      relay.close();
      relays.delete(relay);
    });
    relay.send(msg, port, '127.0.0.1');
  });
  const server = `127.0.0.1:${(front.address() as { port: number }).port}`;

  let stopped = false;
  const stop = async (): Promise<void> => {
    if (stopped) return;
    stopped = true;
    child.kill('SIGKILL');
    await exited;
    live.delete(child);
    for (const r of relays) r.close();
    front.close();
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await until(async () => {
      if (child.exitCode !== null) throw new Error(`dnsmasq exited (${child.exitCode}): ${stderr}`);
      const r = new dns.promises.Resolver({ timeout: 300, tries: 1 });
      r.setServers([direct]);
      // Any answer (NXDOMAIN too) means it is up.
      return r.resolve4('up.test').then(
        () => true,
        (e: { code?: string }) => e.code === dns.NOTFOUND || e.code === dns.NODATA,
      );
    }, `dnsmasq on ${direct} answering`);
  } catch (err) {
    await stop();
    throw err;
  }

  return {
    server,
    direct,
    get fault() {
      return state.fault;
    },
    set fault(f: DnsFault) {
      state.fault = f;
    },
    get queries() {
      return state.queries;
    },
    async setHosts(hosts, probe) {
      writeFileSync(hostsFile, hostsText(hosts));
      child.kill('SIGHUP');
      const name = probe ?? Object.keys(hosts)[0];
      if (name === undefined) return;
      const want = [...(hosts[name] ?? [])].sort();
      await until(async () => JSON.stringify(await addressesOf(direct, name)) === JSON.stringify(want), `dnsmasq answering ${name} anew`);
    },
    stop,
  };
}

/** The end of a DNS message's question section (header + each question's name, type and class). */
function questionEnd(msg: Buffer): number {
  let at = 12;
  const questions = msg.readUInt16BE(4);
  for (let q = 0; q < questions && at < msg.length; q++) {
    while (at < msg.length && msg[at] !== 0) at += msg[at]! + 1;
    at += 5; // the root label, type, class
  }
  return Math.min(at, msg.length);
}
