/**
 * The per-connection flags of `poise proxy`: timeouts, affinity key, PROXY
 * protocol and the access log (the data path in proxy/connection.ts).
 * Kept apart from the listener / worker flags in proxy.ts.
 */
import type { ConnectionOptions } from '../proxy/options.js';
import { KEYED_POLICY_NAMES, type PolicyName } from '../runtime/policies.js';
import { DURATION_GRAMMAR, choiceFlag, durationFlag, integerFlag, type FlagSpecs, type FlagValues } from './args.js';
import { UsageError } from './usage.js';

/** Flag specs (merged into the proxy's). */
export const CONNECTION_FLAGS = {
  attempts: { type: 'string' },
  'timeout-connect': { type: 'string' },
  'timeout-client': { type: 'string' },
  'timeout-server': { type: 'string' },
  key: { type: 'string' },
  'send-proxy': { type: 'boolean' },
  'send-proxy-v2': { type: 'boolean' },
  'accept-proxy': { type: 'boolean' },
  'accept-proxy-timeout': { type: 'string' },
  'accept-proxy-max-bytes': { type: 'string' },
  'access-log': { type: 'boolean' },
} as const satisfies FlagSpecs;

/** Their --help lines. */
export const CONNECTION_HELP = `connections (durations D: ${DURATION_GRAMMAR}):
  --attempts N             backends tried per connection, 1..100 (default 3)
  --timeout-connect D      per-attempt connect timeout, 1ms..10m (default 2s)
  --timeout-client D       client-side inactivity, 0 = none, ..24h (default 30s)
  --timeout-server D       server-side inactivity, 0 = none, ..24h (default 30s)
  --key client-ip|client-ip:port
                           affinity key for the keyed policies (rendezvous, maglev,
                           maglev:bounded, ring-hash, ring-hash:bounded; default
                           client-ip with those; refused with the others)
  --send-proxy             send a PROXY protocol v1 header to backends
  --send-proxy-v2          send a PROXY protocol v2 (binary) header to backends
  --accept-proxy           expect a PROXY v1 or v2 header from clients; its address
                           is the client for --key and the access log
  --accept-proxy-timeout D time allowed for that header, 1ms..10m (default 5s)
  --accept-proxy-max-bytes N
                           largest v2 header accepted, 28..65551 (default 536)
  --access-log             one JSON line per connection on stdout (client, backend,
                           bytes, connect time, duration, termination)`;

const DAY = 86_400_000;
const KEYED: readonly PolicyName[] = KEYED_POLICY_NAMES;

/** Validated per-connection options of one run; throws {@link UsageError} naming the flag. */
export function connectionFlags(values: FlagValues<typeof CONNECTION_FLAGS>, policy: PolicyName): ConnectionOptions {
  let key = choiceFlag('--key', values.key, ['client-ip', 'client-ip:port'] as const);
  const keyed = KEYED.includes(policy);
  if (key !== undefined && !keyed)
    throw new UsageError(`--key: only with a keyed --policy (${KEYED.join(', ')}), got --policy ${policy}`, '--key');
  if (keyed) key ??= 'client-ip';
  if (values['send-proxy'] && values['send-proxy-v2'])
    throw new UsageError('--send-proxy-v2: give one of --send-proxy and --send-proxy-v2', '--send-proxy-v2');
  const acceptProxy = values['accept-proxy'];
  if (!acceptProxy && (values['accept-proxy-timeout'] !== undefined || values['accept-proxy-max-bytes'] !== undefined)) {
    throw new UsageError(
      '--accept-proxy-timeout and --accept-proxy-max-bytes need --accept-proxy',
      values['accept-proxy-timeout'] !== undefined ? '--accept-proxy-timeout' : '--accept-proxy-max-bytes',
    );
  }
  return {
    attempts: integerFlag('--attempts', values.attempts, 1, 100) ?? 3,
    connectTimeoutMs: durationFlag('--timeout-connect', values['timeout-connect'], 1, 600_000) ?? 2000,
    clientTimeoutMs: durationFlag('--timeout-client', values['timeout-client'], 0, DAY) ?? 30_000,
    serverTimeoutMs: durationFlag('--timeout-server', values['timeout-server'], 0, DAY) ?? 30_000,
    key,
    sendProxy: values['send-proxy'] ? 'v1' : values['send-proxy-v2'] ? 'v2' : undefined,
    acceptProxy,
    acceptProxyTimeoutMs: durationFlag('--accept-proxy-timeout', values['accept-proxy-timeout'], 1, 600_000) ?? 5000,
    acceptProxyMaxBytes: integerFlag('--accept-proxy-max-bytes', values['accept-proxy-max-bytes'], 28, 65_551) ?? 536,
    accessLog: values['access-log'] ? 'stdout' : undefined,
  };
}
