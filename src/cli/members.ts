/**
 * `poise members` — operate the Redis control plane of one cluster.
 *
 *   poise members apply|add|remove|drain|undrain|weight|show|watch --redis URL --cluster NAME ...
 *   (or --sentinel HOST:PORT,... --sentinel-name NAME, or --redis-cluster HOST:PORT,...)
 *
 * Exit codes come from the error's code through the one table of every
 * command (exit.ts): 0 success (a write prints the new version on stdout),
 * 1 runtime failure, 2 usage, 3 rejected by validation, 4 not found,
 * 5 conflict, 6 capacity exhausted (version ceiling), 7 stored snapshot corrupt,
 * 8 written but not acknowledged by --wait-replicas replicas in time.
 */
import type { Command } from './command.js';
import { PoiseError } from '../core/errors.js';
import type { BackendSpec } from '../core/spec.js';
import { DEFAULT_MAX_DOCUMENT_BYTES, MAX_VERSION, formatOf, parseText } from '../membership/document.js';
import { readFileLimited, readStreamLimited } from '../membership/read-limited.js';
import { MembershipPublisher } from '../membership/redis-publisher.js';
import { RedisMembership } from '../membership/redis-source.js';
import type { RedisConnectionOptions } from '../membership/redis-target.js';
import type { MembershipSource } from '../membership/source.js';
import { DURATION_GRAMMAR, choiceFlag, durationFlag, integerFlag, nameFlag, parseFlags, type FlagSpecs, type ParsedFlags } from './args.js';
import { REDIS_FLAGS, REDIS_FLAGS_HELP, redisFlags } from './redis-flags.js';
import { DISCOVER_FLAGS, DISCOVER_FLAGS_HELP, discoverFlag, type DiscoverFlagValues } from './discover-flags.js';
import { EXIT, EXIT_HELP, exitCodeOf } from './exit.js';
import { cliLogger } from './logger.js';
import { membershipTable } from './table.js';
import { UsageError } from './usage.js';

const COMMON = `Common flags:
${REDIS_FLAGS_HELP}
  --cluster NAME    cluster name; default $POISE_CLUSTER
  --prefix P        key prefix; default "poise"
  --max-bytes N     largest snapshot/notice/document in bytes; default 1048576
  --wait-replicas N (writes) succeed only once N replicas acknowledged the write (Redis WAIT);
                    fewer within --wait-timeout exits 8 (stored on the master, may be lost at a failover)
  --wait-timeout D  (writes) how long to wait for them, 1ms..1m (${DURATION_GRAMMAR}); default 1s
  --notices FORM    (writes) delta (default: a one-backend change publishes only the change) or full
                    (every write publishes the whole snapshot, as earlier releases did: for fleets whose
                    readers are not all upgraded yet)
  --help            this help

${EXIT_HELP}`;

/** Flags every subcommand takes. */
const COMMON_FLAGS = {
  ...REDIS_FLAGS,
  cluster: { type: 'string' },
  prefix: { type: 'string' },
  'max-bytes': { type: 'string' },
  'wait-replicas': { type: 'string' },
  'wait-timeout': { type: 'string' },
  notices: { type: 'string' },
} as const satisfies FlagSpecs;

const S = { type: 'string' } as const;

const HELP: Record<string, { usage: string; text: string; flags: FlagSpecs }> = {
  apply: {
    usage: 'poise members apply FILE|- [--version N] [--if-version N]',
    text: `Replaces the whole membership with a JSON or YAML document ({ cluster, version?, backends }).
FILE "-" reads JSON from stdin. The document is validated first; an invalid one changes nothing.
  --version N      store as version N, in [1, 9007199254740991] (must be greater than the stored version;
                   overrides the document's). Versions never pass 2^53 - 1: at the ceiling a write exits 6.
  --if-version N   write only if the stored version is N (0 = nothing stored yet)
Prints the new version.`,
    flags: { version: S, 'if-version': S },
  },
  add: {
    usage:
      'poise members add ID HOST:PORT [--weight W] [--priority P] [--locality L] [--locality-weight W] [--status S] [--max-inflight N] [--role primary|replica] [--no-panic]',
    text: 'Adds one backend (the id must be new). Prints the new version.',
    flags: {
      weight: S,
      priority: S,
      locality: S,
      'locality-weight': S,
      status: S,
      'max-inflight': S,
      role: S,
      'no-panic': { type: 'boolean' },
    },
  },
  remove: { usage: 'poise members remove ID', text: 'Removes one backend. Prints the new version.', flags: {} },
  drain: {
    usage: 'poise members drain ID',
    text: 'Marks a backend "draining": no new picks, in-flight work finishes. Prints the new version.',
    flags: {},
  },
  undrain: { usage: 'poise members undrain ID', text: 'Marks a backend "ready" again. Prints the new version.', flags: {} },
  weight: {
    usage: 'poise members weight ID W',
    text: 'Sets a backend weight (an integer in [1, 4294967295]). Prints the new version.',
    flags: {},
  },
  show: {
    usage: 'poise members show [--json]',
    text: `Prints the stored membership as a table: a line with cluster, version, lineage and the number of
backends, then one row per backend (status, weight, priority, locality, address):
  cluster api  version 6  lineage 3f2a...  backends 2
  BACKEND  STATUS    WEIGHT  PRIORITY  LOCALITY  ADDRESS
  a        ready          1         0  -         127.0.0.1:7001
  --json      print JSON instead: { "version": N, "lineage": "<hex>", "document": { cluster, backends } }
The lineage names the version line: a new one starts when the cluster's first version is written into an empty Redis.
Exit 4 when none is stored, 7 when the stored value is not a valid snapshot.
With --discover SPEC (no Redis) it asks the discovery source once and prints what it found:
${DISCOVER_FLAGS_HELP}`,
    flags: { json: { type: 'boolean' }, ...DISCOVER_FLAGS },
  },
  watch: {
    usage: 'poise members watch [--count N] [--json]',
    text: `Follows the cluster like a reader does and prints, per applied version, the table of \`show\`
(summary line, one row per backend) followed by a blank line.
  --json      print each applied snapshot as one JSON line instead
  --count N   exit 0 after N applied versions (default: run until SIGINT/SIGTERM)
With --discover SPEC (no Redis) it follows the discovery source instead (see \`show\`).`,
    flags: { count: S, json: { type: 'boolean' }, ...DISCOVER_FLAGS },
  },
};

type Flags = ParsedFlags<FlagSpecs>;

/** A string flag's raw value (the command's specs are a runtime table, so the parser's static types are the loose ones). */
function str(flags: Flags, name: string): string | undefined {
  return flags.values[name] as string | undefined;
}

/** Whether a switch is on. */
function on(flags: Flags, name: string): boolean {
  return (flags.values[name] as unknown) === true;
}

function positional(flags: Flags, n: number, names: string): string[] {
  if (flags.positionals.length !== n) throw new UsageError(`expected ${names}, got ${flags.positionals.length} argument(s)`);
  return flags.positionals;
}

/**
 * The flags every subcommand shares (`argv`: the words after the
 * subcommand), validated as the command does, without connecting. Throws
 * {@link UsageError}. @internal
 */
export function parseMembersConnection(argv: readonly string[]): ReturnType<typeof connection> {
  return connection(parseFlags(argv, COMMON_FLAGS, { positionals: true }));
}

/** The common `--help` text of every subcommand. @internal */
export const MEMBERS_HELP = COMMON;

function connection(flags: Flags): {
  redis: RedisConnectionOptions;
  cluster: string;
  prefix: string;
  maxBytes: number | undefined;
  waitReplicas: number | undefined;
  waitTimeoutMs: number | undefined;
  notices: 'delta' | 'full' | undefined;
} {
  const redis = redisFlags(flags.values as Record<string, string | undefined>, process.env['POISE_REDIS_URL']);
  const cluster = str(flags, 'cluster') ?? process.env['POISE_CLUSTER'];
  if (redis === undefined) throw new UsageError('--redis: required (or --sentinel, --redis-cluster, or set POISE_REDIS_URL)', '--redis');
  if (cluster === undefined || cluster === '') throw new UsageError('--cluster: required (or set POISE_CLUSTER)', '--cluster');
  const waitReplicas = integerFlag('--wait-replicas', str(flags, 'wait-replicas'), 0, 100);
  const waitTimeoutMs = durationFlag('--wait-timeout', str(flags, 'wait-timeout'), 1, 60_000);
  if (waitTimeoutMs !== undefined && waitReplicas === undefined)
    throw new UsageError('--wait-timeout: only with --wait-replicas', '--wait-timeout');
  return {
    redis,
    waitReplicas,
    waitTimeoutMs,
    notices: choiceFlag('--notices', str(flags, 'notices'), ['delta', 'full'] as const),
    cluster: nameFlag('--cluster', cluster)!,
    prefix: nameFlag('--prefix', str(flags, 'prefix')) ?? 'poise',
    maxBytes: integerFlag('--max-bytes', str(flags, 'max-bytes'), 64, 512 * 1024 * 1024),
  };
}

/** Fail fast instead of queueing forever when Redis is down: a CLI must answer. */
const CLI_REDIS = { maxRetriesPerRequest: 1, connectTimeout: 3000, retryStrategy: (times: number) => (times > 3 ? null : 100 * times) };

async function readDocument(file: string, versionFlag: number | undefined, maxBytes: number): Promise<unknown> {
  // Bounded reads: `apply /dev/zero` is "exceeds N bytes" (exit 3), not an out-of-memory crash.
  const text =
    file === '-' ? await readStreamLimited(process.stdin, maxBytes, 'document') : await readFileLimited(file, maxBytes, 'document');
  const doc = parseText(text, file === '-' ? 'json' : formatOf(file), 'document');
  if (versionFlag !== undefined && typeof doc === 'object' && doc !== null && !Array.isArray(doc)) {
    return { ...(doc as Record<string, unknown>), version: versionFlag };
  }
  return doc;
}

/**
 * A document applied to cluster `cluster` must say so: a missing or other
 * `"cluster"` is refused (`InvalidConfig`, exit 3) naming the document and
 * what to do, before anything connects. Other shapes are left to the
 * publisher's validation.
 */
function checkDocumentCluster(doc: unknown, where: string, cluster: string): void {
  if (typeof doc !== 'object' || doc === null || Array.isArray(doc)) return;
  const named = (doc as Record<string, unknown>)['cluster'];
  if (named === undefined) {
    throw new PoiseError(
      'InvalidConfig',
      `${where}: the document has no "cluster"; add "cluster": ${JSON.stringify(cluster)} to it (the cluster this command writes, from --cluster or POISE_CLUSTER)`,
      { field: 'cluster' },
    );
  }
  if (typeof named === 'string' && named !== cluster) {
    throw new PoiseError(
      'InvalidConfig',
      `${where}: the document is for cluster ${JSON.stringify(named)}, not ${JSON.stringify(cluster)} (--cluster or POISE_CLUSTER); apply it with --cluster ${named}, or change its "cluster"`,
      { field: 'cluster' },
    );
  }
}

async function write(sub: string, flags: Flags): Promise<number> {
  const conn = connection(flags);
  // Validate flags before connecting: a usage error must not depend on Redis being up.
  let op: (p: MembershipPublisher) => Promise<number>;
  switch (sub) {
    case 'apply': {
      const [file] = positional(flags, 1, 'FILE (or - for stdin)');
      const version = integerFlag('--version', str(flags, 'version'), 1, MAX_VERSION);
      const ifVersion = integerFlag('--if-version', str(flags, 'if-version'), 0, MAX_VERSION);
      const doc = await readDocument(file!, version, conn.maxBytes ?? DEFAULT_MAX_DOCUMENT_BYTES);
      checkDocumentCluster(doc, file === '-' ? 'the document on stdin' : file!, conn.cluster);
      op = (p) => p.apply(doc, ifVersion === undefined ? {} : { ifVersion });
      break;
    }
    case 'add': {
      const [id, address] = positional(flags, 2, 'ID HOST:PORT');
      const spec: Record<string, unknown> = { id, address };
      const ints: [string, keyof BackendSpec][] = [
        ['weight', 'weight'],
        ['priority', 'priority'],
        ['locality-weight', 'localityWeight'],
        ['max-inflight', 'maxInflight'],
      ];
      for (const [flag, field] of ints) {
        const raw = str(flags, flag);
        if (raw !== undefined) spec[field] = /^-?\d+$/.test(raw) ? Number(raw) : raw; // validation names the field
      }
      const locality = str(flags, 'locality');
      if (locality !== undefined) spec['locality'] = locality;
      const status = str(flags, 'status');
      if (status !== undefined) spec['status'] = status;
      const role = str(flags, 'role');
      if (role !== undefined) spec['role'] = role;
      if (on(flags, 'no-panic')) spec['panicEligible'] = false;
      op = (p) => p.add(spec as unknown as BackendSpec);
      break;
    }
    case 'remove':
    case 'drain':
    case 'undrain': {
      const [id] = positional(flags, 1, 'ID');
      op = (p) => (sub === 'remove' ? p.remove(id!) : sub === 'drain' ? p.drain(id!) : p.undrain(id!));
      break;
    }
    case 'weight': {
      const [id, w] = positional(flags, 2, 'ID WEIGHT');
      const weight = /^-?\d+$/.test(w!) ? Number(w) : w;
      op = (p) => p.setWeight(id!, weight as number);
      break;
    }
    default:
      throw new UsageError(`unknown subcommand ${JSON.stringify(sub)}`);
  }
  const pub = publisher(conn);
  try {
    const version = await op(pub);
    process.stdout.write(`${version}\n`);
    return EXIT.ok;
  } finally {
    await pub.close();
  }
}

function publisher(conn: ReturnType<typeof connection>): MembershipPublisher {
  return new MembershipPublisher({
    ...conn.redis,
    cluster: conn.cluster,
    prefix: conn.prefix,
    ...(conn.maxBytes === undefined ? {} : { maxMessageBytes: conn.maxBytes }),
    ...(conn.waitReplicas === undefined ? {} : { waitReplicas: conn.waitReplicas }),
    ...(conn.waitTimeoutMs === undefined ? {} : { waitTimeoutMs: conn.waitTimeoutMs }),
    ...(conn.notices === undefined ? {} : { notices: conn.notices }),
    logger: cliLogger('poise-members', { dflt: 'warn' }),
    redisOptions: CLI_REDIS,
  });
}

/**
 * Starts `source` and prints each snapshot it delivers (the table of `show`,
 * or one JSON line with --json) until `count` were printed or SIGINT/SIGTERM.
 * `cluster`: the table's cluster label.
 */
async function follow(flags: Flags, source: MembershipSource, cluster: string, count: number | undefined): Promise<number> {
  const json = on(flags, 'json');
  let applied = 0;
  let finish: () => void = () => {};
  const done = new Promise<void>((resolve) => {
    finish = resolve;
  });
  const onSignal = (): void => finish();
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    await source.start((s) => {
      process.stdout.write(
        json ? `${JSON.stringify(s)}\n` : `${membershipTable({ cluster, version: s.version, lineage: s.lineage, backends: s.backends })}\n`,
      );
      if (count !== undefined && ++applied >= count) finish();
    });
    await done;
    return EXIT.ok;
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    await source.close();
  }
}

/** `show` / `watch` of a `--discover` source: what it found, as the Redis forms print it. */
function discovered(flags: Flags, count: number | undefined): Promise<number> {
  positional(flags, 0, 'no arguments');
  const source = discoverFlag(flags.values as DiscoverFlagValues, cliLogger('poise-members', { dflt: 'warn' }))!;
  return follow(flags, source, source.description ?? '', count);
}

async function show(flags: Flags): Promise<number> {
  if (str(flags, 'discover') !== undefined) return discovered(flags, 1);
  const conn = connection(flags);
  positional(flags, 0, 'no arguments');
  const pub = publisher(conn);
  try {
    const stored = await pub.show();
    if (stored === undefined) {
      throw new PoiseError('NotFound', `no membership stored for cluster ${JSON.stringify(conn.cluster)} (key ${pub.keys.snapshot})`, {
        field: 'cluster',
      });
    }
    if (on(flags, 'json')) {
      process.stdout.write(
        `${JSON.stringify({ version: stored.version, lineage: stored.lineage ?? null, document: stored.document }, null, 2)}\n`,
      );
    } else {
      process.stdout.write(
        membershipTable({
          cluster: stored.document.cluster,
          version: stored.version,
          lineage: stored.lineage,
          backends: stored.document.backends,
        }),
      );
    }
    return EXIT.ok;
  } finally {
    await pub.close();
  }
}

async function watchCmd(flags: Flags): Promise<number> {
  const count = integerFlag('--count', str(flags, 'count'), 1, Number.MAX_SAFE_INTEGER);
  if (str(flags, 'discover') !== undefined) return discovered(flags, count);
  const conn = connection(flags);
  positional(flags, 0, 'no arguments');
  const source = new RedisMembership({
    ...conn.redis,
    cluster: conn.cluster,
    prefix: conn.prefix,
    ...(conn.maxBytes === undefined ? {} : { maxMessageBytes: conn.maxBytes }),
    logger: cliLogger('poise-members', { dflt: 'info' }),
  });
  return follow(flags, source, conn.cluster, count);
}

async function run(argv: string[]): Promise<number> {
  const [sub, ...rest] = argv;
  if (sub === undefined || sub === '--help' || sub === '-h' || sub === 'help') {
    const lines = ['usage: poise members <subcommand> --redis URL --cluster NAME ...', '', 'subcommands:'];
    for (const [name, h] of Object.entries(HELP)) lines.push(`  ${name.padEnd(8)} ${h.usage.replace(/^poise members \S+ ?/, '')}`);
    lines.push('', COMMON, '', 'Run `poise members <subcommand> --help` for details.');
    (sub === undefined ? process.stderr : process.stdout).write(`${lines.join('\n')}\n`);
    return sub === undefined ? EXIT.usage : EXIT.ok;
  }
  const help = HELP[sub];
  if (help === undefined) {
    process.stderr.write(`poise members: unknown subcommand ${JSON.stringify(sub)} (try --help)\n`);
    return EXIT.usage;
  }
  try {
    const flags = parseFlags(rest, { ...COMMON_FLAGS, ...help.flags }, { positionals: true });
    if (flags.values.help) {
      process.stdout.write(`usage: ${help.usage} --redis URL --cluster NAME\n\n${help.text}\n\n${COMMON}\n`);
      return EXIT.ok;
    }
    if (sub === 'show') return await show(flags);
    if (sub === 'watch') return await watchCmd(flags);
    return await write(sub, flags);
  } catch (err) {
    const code = exitCodeOf(err);
    const msg = err instanceof Error ? err.message : String(err);
    process.stderr.write(`poise members ${sub}: ${msg}${code === EXIT.usage ? `\nusage: ${help.usage} --redis URL --cluster NAME` : ''}\n`);
    return code;
  }
}

/** The `poise members` subcommand. */
export const command: Command = {
  summary: 'operate the Redis membership control plane (apply, add, remove, drain, undrain, weight, show, watch)',
  run,
};
