/**
 * `poise proxy`: a TCP load balancer in front of a pool of backends.
 *
 *     poise proxy --listen 127.0.0.1:6000 --backend a=127.0.0.1:7001 --backend b=127.0.0.1:7002
 *     poise proxy --listen 127.0.0.1:6000 --file members.json
 *     poise proxy --listen 127.0.0.1:6000 --redis redis://127.0.0.1:6379 --cluster api
 *
 * Exit codes: 0 after a clean stop (SIGINT / SIGTERM), 1 on a runtime
 * failure (cannot listen, membership unavailable), 2 on a usage error.
 */
import { parseArgs } from 'node:util';
import { PoiseError } from '../core/errors.js';
import { parseAddress, type BackendSpec } from '../core/spec.js';
import { createLogger } from '../log.js';
import { bindMembership, type MembershipSource } from '../membership/source.js';
import { StaticMembership } from '../membership/static.js';
import { RedisMembership } from '../membership/redis-source.js';
import { TcpProxy } from '../net/proxy.js';
import { Balancer } from '../runtime/balancer.js';
import { POLICY_NAMES, type PolicyName } from '../runtime/policies.js';
import type { Command } from './main.js';

const HELP = `usage: poise proxy --listen HOST:PORT (--backend ID=HOST:PORT ... | --file PATH | --redis URL --cluster NAME) [flags]

Accepts TCP connections on --listen and splices each onto a backend chosen
by the policy; a refused or timed-out connect is retried on another backend
and counts towards passive-health ejection.

membership (exactly one source):
  --backend ID=HOST:PORT   a backend, repeatable (weight 1, priority 0)
  --file PATH              a membership document (JSON or YAML), watched for changes
  --redis URL --cluster NAME [--prefix P]
                           the Redis control plane (see \`poise members\`)

flags:
  --listen HOST:PORT       listen address (required)
  --policy NAME            ${POLICY_NAMES.join(' | ')}
                           (default p2c:connections)
  --attempts N             backends tried per connection, 1..100 (default 3)
  --connect-timeout MS     per-attempt connect timeout, 1..600000 (default 2000)
  --idle-timeout MS        close idle pairs after MS, 0 = never (default 0)
  --capacity N             backend slots in the load table, 1..65536 (default 1024)
  --log-level LEVEL        pino level (default info)
  -h, --help               this text

exit codes: 0 clean stop (SIGINT/SIGTERM), 1 runtime failure, 2 usage error`;

class Usage extends Error {}

function int(flag: string, raw: string | undefined, min: number, max: number, dflt: number): number {
  if (raw === undefined) return dflt;
  const n = Number(raw);
  if (!/^-?\d+$/.test(raw) || n < min || n > max) throw new Usage(`--${flag}: must be an integer in [${min}, ${max}], got ${JSON.stringify(raw)}`);
  return n;
}

function backendFlag(raw: string, i: number): BackendSpec {
  const eq = raw.indexOf('=');
  const id = eq > 0 ? raw.slice(0, eq) : raw;
  const address = eq > 0 ? raw.slice(eq + 1) : raw;
  if (parseAddress(address) === undefined) throw new Usage(`--backend #${i + 1}: must be ID=HOST:PORT with a port in [1, 65535], got ${JSON.stringify(raw)}`);
  return { id, address };
}

async function run(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      options: {
        listen: { type: 'string' },
        backend: { type: 'string', multiple: true },
        file: { type: 'string' },
        redis: { type: 'string' },
        cluster: { type: 'string' },
        prefix: { type: 'string' },
        policy: { type: 'string' },
        attempts: { type: 'string' },
        'connect-timeout': { type: 'string' },
        'idle-timeout': { type: 'string' },
        capacity: { type: 'string' },
        'log-level': { type: 'string' },
        help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (err) {
    process.stderr.write(`poise proxy: ${(err as Error).message}\n\n${HELP}\n`);
    return 2;
  }
  if (values.help === true) {
    process.stdout.write(`${HELP}\n`);
    return 0;
  }
  let listen: { host: string; port: number };
  let source: MembershipSource;
  let policy: PolicyName;
  let attempts: number;
  let connectTimeoutMs: number;
  let idleTimeoutMs: number;
  let capacity: number;
  const log = createLogger({ name: 'poise-proxy', level: values['log-level'], pretty: process.stderr.isTTY });
  try {
    const at = values.listen === undefined ? undefined : parseAddress(values.listen);
    if (at === undefined) throw new Usage(`--listen: required, HOST:PORT with a port in [1, 65535], got ${JSON.stringify(values.listen ?? null)}`);
    listen = at;
    const rawPolicy = values.policy ?? 'p2c:connections';
    if (!(POLICY_NAMES as readonly string[]).includes(rawPolicy)) throw new Usage(`--policy: must be one of ${POLICY_NAMES.join(', ')}, got ${JSON.stringify(rawPolicy)}`);
    policy = rawPolicy as PolicyName;
    attempts = int('attempts', values.attempts, 1, 100, 3);
    connectTimeoutMs = int('connect-timeout', values['connect-timeout'], 1, 600_000, 2000);
    idleTimeoutMs = int('idle-timeout', values['idle-timeout'], 0, 86_400_000, 0);
    capacity = int('capacity', values.capacity, 1, 65536, 1024);
    const chosen = [values.backend !== undefined, values.file !== undefined, values.redis !== undefined].filter(Boolean).length;
    if (chosen !== 1) throw new Usage('membership: give exactly one of --backend, --file, --redis');
    if (values.redis !== undefined) {
      if (values.cluster === undefined) throw new Usage('--cluster: required with --redis');
      source = new RedisMembership({ url: values.redis, cluster: values.cluster, prefix: values.prefix, logger: log });
    } else if (values.file !== undefined) {
      source = new StaticMembership({ file: values.file }, { watch: true, logger: log });
    } else {
      source = new StaticMembership({ backends: values.backend!.map(backendFlag) }, { logger: log });
    }
  } catch (err) {
    if (err instanceof Usage || (err instanceof PoiseError && err.code === 'InvalidConfig')) {
      process.stderr.write(`poise proxy: ${err.message}\n`);
      return 2;
    }
    throw err;
  }

  const balancer = new Balancer({ capacity, logger: log });
  const binding = await bindMembership(source, balancer, { logger: log });
  const router = balancer.router({ policy, logger: log });
  const proxy = new TcpProxy({ router, host: listen.host, port: listen.port, attempts, connectTimeoutMs, idleTimeoutMs, logger: log });
  try {
    await proxy.listen();
  } catch (err) {
    log.error({ err: (err as Error).message }, 'proxy: cannot listen');
    await binding.close();
    balancer.close();
    return 1;
  }
  log.info({ policy, version: balancer.version }, 'proxy ready');
  await new Promise<void>((resolve) => {
    const stop = (signal: string): void => {
      log.info({ signal, stats: proxy.stats }, 'proxy stopping');
      resolve();
    };
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  await proxy.close();
  await binding.close();
  balancer.close();
  return 0;
}

/** The `proxy` subcommand. */
export const command: Command = {
  summary: 'TCP load balancer in front of a pool of backends',
  run,
};
