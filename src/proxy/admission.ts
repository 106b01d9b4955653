/**
 * Admission bands for the TCP proxy: which band a client's connection is
 * admitted in, from the listener it arrived on or from its address (a
 * client-CIDR → band map, longest prefix first). A band is a rank, larger =
 * more important. The proxy hands the band to `connect(router, { band })`, so with an `AdmissionGate` on
 * the router, batch clients are held back first when backends saturate.
 */
import net from 'node:net';
import { PoiseError, checkOptionKeys, invalidConfig } from '../core/errors.js';
import { finiteNumber } from '../core/validate.js';

/** Picks the admission band of one client connection. */
export interface ProxyBandSelector {
  /** The band (its rank) of a client at `clientAddress` (the PROXY header's source when accepted); undefined: no admission. */
  bandOf(clientAddress: string | undefined): number | undefined;
  /**
   * The selector as plain data, for proxy worker threads (a function cannot
   * cross threads); {@link fixedBand} and {@link CidrBands} have it, and
   * `TcpProxy({ workers })` accepts only a selector that does.
   */
  portable?(): BandSelectorData;
}

/** A {@link fixedBand} or {@link CidrBands} as structured-clonable data (what {@link ProxyBandSelector.portable} returns). */
export type BandSelectorData = { kind: 'fixed'; rank: number } | { kind: 'cidr'; options: CidrBandsOptions };

/** Rebuilds a selector from its {@link ProxyBandSelector.portable} data (in a proxy worker). @internal */
export function bandSelectorFrom(d: BandSelectorData): ProxyBandSelector {
  return d.kind === 'fixed' ? fixedBand(d.rank) : new CidrBands(d.options);
}

/** A named band. */
export interface ProxyBand {
  /** The band's name (for flags and CIDR maps). */
  name: string;
  /** The band's rank: larger = more important (the gate's `bands` are these ranks). */
  rank: number;
}

/** Options of {@link CidrBands}. */
export interface CidrBandsOptions {
  /** Every band, each name and rank once. */
  bands: readonly ProxyBand[];
  /** `CIDR → band name`, e.g. `{ cidr: '10.8.0.0/16', band: 'batch' }`; the longest matching prefix wins. */
  cidrs: readonly { cidr: string; band: string }[];
  /** The band of a client no CIDR matches; default the most important band. */
  defaultBand?: string;
}

interface Entry {
  prefix: number;
  list: net.BlockList;
  rank: number;
}

/**
 * Every connection in one band, of rank `rank` (a listener of its own per band).
 *
 * @example
 * const batch = new TcpProxy({ router, port: 6001, admission: fixedBand(1) }); // this port's clients are batch
 */
export function fixedBand(rank: number): ProxyBandSelector {
  finiteNumber(rank, 'band rank');
  return { bandOf: () => rank, portable: () => ({ kind: 'fixed', rank }) };
}

/**
 * A client-CIDR → band map. Throws one `InvalidConfig` naming every bad
 * band, CIDR and default at once.
 *
 * @example
 * const bands = new CidrBands({ bands: [{ name: 'web', rank: 10 }, { name: 'batch', rank: 1 }],
 *   cidrs: [{ cidr: '10.8.0.0/16', band: 'batch' }] });
 * bands.bandOf('10.8.3.4'); // 1
 */
export class CidrBands implements ProxyBandSelector {
  private readonly entries: Entry[] = [];
  private readonly fallback: number;
  private readonly options: CidrBandsOptions;

  /** Throws one `InvalidConfig` naming every bad band, CIDR and default. */
  constructor(opts: CidrBandsOptions) {
    if (typeof opts !== 'object' || opts === null) invalidConfig('options', 'must be an object', opts);
    checkOptionKeys(opts, ['bands', 'cidrs', 'defaultBand']);
    const problems: string[] = [];
    const byName = new Map<string, number>();
    const bands = Array.isArray(opts.bands) ? opts.bands : [];
    if (bands.length === 0) problems.push('options.bands: must be a non-empty array of { name, rank }');
    bands.forEach((b, i) => {
      if (typeof b?.name !== 'string' || b.name.length === 0) problems.push(`options.bands[${i}].name: must be a non-empty string`);
      else if (byName.has(b.name)) problems.push(`options.bands[${i}].name: repeats ${JSON.stringify(b.name)}`);
      if (typeof b?.rank !== 'number' || !Number.isFinite(b.rank)) problems.push(`options.bands[${i}].rank: must be a finite number`);
      else if ([...byName.values()].includes(b.rank)) problems.push(`options.bands[${i}].rank: repeats ${b.rank}`);
      if (typeof b?.name === 'string' && typeof b?.rank === 'number') byName.set(b.name, b.rank);
    });
    const cidrs = Array.isArray(opts.cidrs) ? opts.cidrs : [];
    cidrs.forEach((c, i) => {
      const parsed = parseCidr(c?.cidr);
      const rank = byName.get(c?.band);
      if (parsed === undefined)
        problems.push(`options.cidrs[${i}].cidr: must be ADDRESS/PREFIX (IPv4 /0..32 or IPv6 /0..128), got ${JSON.stringify(c?.cidr)}`);
      if (rank === undefined) problems.push(`options.cidrs[${i}].band: must name a band, got ${JSON.stringify(c?.band)}`);
      if (parsed !== undefined && rank !== undefined) {
        const list = new net.BlockList();
        list.addSubnet(parsed.address, parsed.prefix, parsed.family);
        // IPv6 prefixes compare after IPv4 ones of the same length; the sort key keeps v4 /n and v6 /(96 + n) together.
        this.entries.push({ prefix: parsed.family === 'ipv4' ? parsed.prefix + 96 : parsed.prefix, list, rank });
      }
    });
    let fallback = bands.length > 0 ? Math.max(...bands.map((b) => (typeof b?.rank === 'number' ? b.rank : Number.NEGATIVE_INFINITY))) : 0;
    if (opts.defaultBand !== undefined) {
      const p = byName.get(opts.defaultBand);
      if (p === undefined) problems.push(`options.defaultBand: must name a band, got ${JSON.stringify(opts.defaultBand)}`);
      else fallback = p;
    }
    if (problems.length > 0) {
      throw new PoiseError(
        'InvalidConfig',
        problems.length === 1 ? problems[0]! : `${problems.length} bad options: ${problems.join('; ')}`,
        {
          field: problems.map((p) => p.slice(0, p.indexOf(':'))).join(', '),
        },
      );
    }
    this.entries.sort((a, b) => b.prefix - a.prefix);
    this.fallback = fallback;
    this.options = {
      bands: bands.map((b) => ({ name: b.name, rank: b.rank })),
      cidrs: cidrs.map((c) => ({ cidr: c.cidr, band: c.band })),
      ...(opts.defaultBand === undefined ? {} : { defaultBand: opts.defaultBand }),
    };
  }

  /** These bands as plain data (rebuilt in each proxy worker thread). */
  portable(): BandSelectorData {
    return { kind: 'cidr', options: this.options };
  }

  /** The band of the longest matching CIDR, else the default band. */
  bandOf(clientAddress: string | undefined): number {
    if (clientAddress !== undefined) {
      const family = net.isIPv4(clientAddress) ? 'ipv4' : net.isIPv6(clientAddress) ? 'ipv6' : undefined;
      if (family !== undefined) for (const e of this.entries) if (e.list.check(clientAddress, family)) return e.rank;
    }
    return this.fallback;
  }
}

/** `ADDRESS/PREFIX` → its parts, or undefined when malformed. @internal */
export function parseCidr(text: unknown): { address: string; prefix: number; family: 'ipv4' | 'ipv6' } | undefined {
  if (typeof text !== 'string') return undefined;
  const slash = text.lastIndexOf('/');
  if (slash < 0) return undefined;
  const address = text.slice(0, slash);
  const bits = text.slice(slash + 1);
  if (!/^\d{1,3}$/.test(bits)) return undefined;
  const prefix = Number(bits);
  if (net.isIPv4(address)) return prefix <= 32 ? { address, prefix, family: 'ipv4' } : undefined;
  if (net.isIPv6(address)) return prefix <= 128 ? { address, prefix, family: 'ipv6' } : undefined;
  return undefined;
}
