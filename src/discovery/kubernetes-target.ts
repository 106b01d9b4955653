/**
 * What a Kubernetes membership source is asked for: its target
 * (`namespace/service[:port-name]`, each part a DNS-1123 label) and its
 * options (kubernetes.ts follows the target).
 */
import type { Logger } from 'pino';
import { invalidConfig } from '../core/errors.js';
import type { TimerSource } from '../core/timers.js';
import type { CredentialOptions } from './kube-config.js';

/** Options of {@link kubernetesSource}. Credentials: {@link CredentialOptions}. */
export interface KubernetesSourceOptions extends CredentialOptions {
  /** The cluster name the snapshots carry (a Balancer's cluster, a fleet's Redis cluster). */
  cluster?: string;
  /** No line at all on a watch (no event, no bookmark) for this long → drop it and re-list, ms; default 120000 (the API server sends a bookmark about once a minute). */
  stallTimeoutMs?: number;
  /** The server-side watch timeout, s: each watch asks for a uniform draw in [T, 2T); default 300 (client-go's). */
  watchTimeoutSeconds?: number;
  /** Deadline of one list request, ms; default 30000. */
  requestTimeoutMs?: number;
  /** Back-off after a failure: uniform in [baseMs, min(maxMs, baseMs · 2^(n+1))); default 500 / 30000 ms. */
  backoff?: { baseMs?: number; maxMs?: number };
  /** How long start() waits for the first membership before it resolves without one (`problem` set); default 10000 ms. */
  startTimeoutMs?: number;
  /**
   * What start() does when no membership came within `startTimeoutMs`:
   * `'wait'` (default) resolves and keeps trying (`problem` says why);
   * `'reject'` closes the source and rejects with that problem (the CLI's
   * `--require-membership`, as the DNS sources' `initial`).
   */
  initial?: 'reject' | 'wait';
  /** Re-read the service-account token file at most this often, ms; default 60000 (and at once after a 401). */
  tokenRefreshMs?: number;
  /** Slices per list page (`limit`); default 500. */
  pageSize?: number;
  /** The clock and timers of the back-off, the watchdog and the deadlines; default real time. */
  timers?: TimerSource;
  /** Seed of the back-off's jitter (for replay); default OS-seeded. */
  seed?: number;
  /** pino logger; default {@link defaultLogger}. */
  logger?: Logger;
}

/** Every option {@link KubernetesSourceOptions} names (and the credentials'). @internal */
export const OPTION_KEYS = [
  'cluster',
  'stallTimeoutMs',
  'watchTimeoutSeconds',
  'requestTimeoutMs',
  'backoff',
  'startTimeoutMs',
  'initial',
  'tokenRefreshMs',
  'pageSize',
  'timers',
  'seed',
  'logger',
  'credentials',
  'kubeconfig',
  'context',
  'serviceAccountDir',
  'env',
];

/** A DNS-1123 label: a namespace, a service or a port name. */
const LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;

/** A parsed `namespace/service[:port-name]`. */
export interface KubernetesTarget {
  /** Undefined: the service account's or the context's namespace, else `default`. */
  readonly namespace: string | undefined;
  readonly service: string;
  readonly port: string | undefined;
}

/** Parses `namespace/service[:port-name]` (the namespace may be left out); `InvalidConfig` naming the part. */
export function parseKubernetesTarget(target: string, field = 'target'): KubernetesTarget {
  if (typeof target !== 'string') invalidConfig(field, 'must be a string "namespace/service[:port-name]"', target);
  const m = /^(?:([^/:]*)\/)?([^/:]*)(?::([^/:]*))?$/.exec(target);
  if (m === null) invalidConfig(field, 'must be "namespace/service[:port-name]"', target);
  const [, namespace, service, port] = m;
  const check = (part: string | undefined, what: string): void => {
    if (part !== undefined && !LABEL.test(part))
      invalidConfig(
        field,
        `the ${what} ${JSON.stringify(part)} is not a DNS-1123 label (1 to 63 characters of [a-z0-9-], starting and ending with a letter or digit)`,
        target,
      );
  };
  check(namespace, 'namespace');
  check(service, 'service');
  check(port, 'port name');
  return { namespace, service: service!, port };
}
