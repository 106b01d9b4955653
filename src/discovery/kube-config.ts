/**
 * Where the Kubernetes API server is and how to prove who we are: the pod's
 * service account (in-cluster) or a kubeconfig file (its current context, or
 * a named one). Nothing here talks to the server (kube-client.ts does).
 *
 * In-cluster: `KUBERNETES_SERVICE_HOST` / `KUBERNETES_SERVICE_PORT` and the
 * files `token`, `ca.crt`, `namespace` of
 * `/var/run/secrets/kubernetes.io/serviceaccount`. The token is a bound
 * service-account token that the kubelet rotates (about hourly): it is a
 * file to re-read, never a string to keep (kube-client.ts re-reads it).
 *
 * Kubeconfig: `clusters[].cluster` (`server`, `certificate-authority` or
 * `-data`, `insecure-skip-tls-verify`, `tls-server-name`),
 * `users[].user` (`token`, `tokenFile`, `client-certificate` / `client-key`
 * or their `-data`), `contexts[].context` (`cluster`, `user`, `namespace`).
 * Relative paths are relative to the kubeconfig's folder. `exec` and
 * `auth-provider` plugins are refused by name (they run programs; use a
 * token or a client certificate). TLS verification is on unless the cluster
 * entry sets `insecure-skip-tls-verify: true`.
 */
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { PoiseError, invalidConfig } from '../core/errors.js';
import { isIPv6 } from '../core/ip.js';
import { parseText } from '../membership/document.js';

/** The service account's folder in every pod. */
export const SERVICE_ACCOUNT_DIR = '/var/run/secrets/kubernetes.io/serviceaccount';

/** What a client needs to reach and authenticate to an API server. */
export interface KubeCredentials {
  /** `https://host:port` (or `http://` for `kubectl proxy`). */
  readonly server: string;
  /** PEM of the CA(s) to verify the server with; undefined: the system's. */
  readonly ca: Buffer | undefined;
  /** Client certificate and key (PEM). */
  readonly cert: Buffer | undefined;
  readonly key: Buffer | undefined;
  /** A fixed bearer token (kubeconfig `token`). */
  readonly token: string | undefined;
  /** A file holding the bearer token, re-read as it rotates. */
  readonly tokenFile: string | undefined;
  /** Only when the kubeconfig sets `insecure-skip-tls-verify: true`. */
  readonly insecureSkipTlsVerify: boolean;
  /** The name to verify the server's certificate against, when not the server's host. */
  readonly tlsServerName: string | undefined;
  /** The namespace of the service account or the context, when known. */
  readonly namespace: string | undefined;
  /** Where these came from, for messages (`in-cluster`, `kubeconfig /root/.kube/config (context dev)`). */
  readonly origin: string;
}

/** Where to look. Every field has the real default; tests point them elsewhere. */
export interface CredentialOptions {
  /** `'in-cluster'`, `'kubeconfig'` or `'auto'` (default: in-cluster when `KUBERNETES_SERVICE_HOST` is set, else the kubeconfig). */
  credentials?: 'auto' | 'in-cluster' | 'kubeconfig';
  /** The kubeconfig file; default the first of `$KUBECONFIG`, else `~/.kube/config`. */
  kubeconfig?: string;
  /** The kubeconfig context; default its `current-context`. */
  context?: string;
  /** The service account folder; default {@link SERVICE_ACCOUNT_DIR}. */
  serviceAccountDir?: string;
  /** The environment to read `KUBERNETES_SERVICE_HOST` / `_PORT` and `KUBECONFIG` from; default `process.env`. */
  env?: Readonly<Record<string, string | undefined>>;
}

async function readOptional(file: string): Promise<Buffer | undefined> {
  try {
    return await readFile(file);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

function unavailable(field: string, reason: string, cause?: unknown): never {
  throw new PoiseError('InvalidConfig', `${field}: ${reason}`, { field, cause });
}

/** The in-cluster credentials; undefined when `KUBERNETES_SERVICE_HOST` is not set. */
export async function inClusterCredentials(opts: CredentialOptions = {}): Promise<KubeCredentials | undefined> {
  const env = opts.env ?? process.env;
  const host = env['KUBERNETES_SERVICE_HOST'];
  if (host === undefined || host === '') return undefined;
  const port = env['KUBERNETES_SERVICE_PORT'] ?? '443';
  const dir = opts.serviceAccountDir ?? SERVICE_ACCOUNT_DIR;
  const tokenFile = path.join(dir, 'token');
  if ((await readOptional(tokenFile)) === undefined)
    unavailable(
      'credentials',
      `in-cluster: KUBERNETES_SERVICE_HOST is set but ${tokenFile} does not exist (is a service account token mounted?)`,
    );
  const ns = await readOptional(path.join(dir, 'namespace'));
  return {
    server: `https://${isIPv6(host) ? `[${host}]` : host}:${port}`,
    ca: await readOptional(path.join(dir, 'ca.crt')),
    cert: undefined,
    key: undefined,
    token: undefined,
    tokenFile,
    insecureSkipTlsVerify: false,
    tlsServerName: undefined,
    namespace: ns === undefined ? undefined : ns.toString('utf8').trim() || undefined,
    origin: 'in-cluster service account',
  };
}

function entry(list: unknown, name: string, kind: string, file: string): Record<string, unknown> {
  if (!Array.isArray(list)) unavailable(`kubeconfig.${kind}s`, `${file} has no ${kind}s list`);
  for (const e of list as unknown[]) {
    if (typeof e === 'object' && e !== null && (e as Record<string, unknown>)['name'] === name) {
      const inner = (e as Record<string, unknown>)[kind];
      if (typeof inner !== 'object' || inner === null) unavailable(`kubeconfig.${kind}s.${name}`, `has no ${kind} object`);
      return inner as Record<string, unknown>;
    }
  }
  return unavailable(`kubeconfig.${kind}s`, `${file} has no ${kind} named ${JSON.stringify(name)}`);
}

function str(o: Record<string, unknown>, key: string, at: string): string | undefined {
  const v = o[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'string') unavailable(`${at}.${key}`, `must be a string, got ${JSON.stringify(v)}`);
  return v;
}

/** A PEM from `<key>-data` (base64) or the file `<key>` (relative to `dir`). */
async function pem(o: Record<string, unknown>, key: string, at: string, dir: string): Promise<Buffer | undefined> {
  const data = str(o, `${key}-data`, at);
  if (data !== undefined) return Buffer.from(data, 'base64');
  const file = str(o, key, at);
  if (file === undefined) return undefined;
  try {
    return await readFile(path.resolve(dir, file));
  } catch (err) {
    return unavailable(`${at}.${key}`, `cannot read ${file} (${(err as Error).message})`, err);
  }
}

/** The kubeconfig file {@link kubeconfigCredentials} reads by default. */
export function defaultKubeconfig(env: Readonly<Record<string, string | undefined>> = process.env): string {
  const list = env['KUBECONFIG'];
  const first = list?.split(path.delimiter).find((f) => f !== '');
  return first ?? path.join(os.homedir(), '.kube', 'config');
}

/** The credentials of a kubeconfig's context (default its `current-context`). */
export async function kubeconfigCredentials(file: string, context?: string): Promise<KubeCredentials> {
  let text: string;
  try {
    text = await readFile(file, 'utf8');
  } catch (err) {
    return unavailable('kubeconfig', `cannot read ${file} (${(err as Error).message})`, err);
  }
  const doc = parseText(text, 'yaml', 'kubeconfig');
  if (typeof doc !== 'object' || doc === null) unavailable('kubeconfig', `${file} is not a kubeconfig (not a mapping)`);
  const root = doc as Record<string, unknown>;
  const name = context ?? str(root, 'current-context', 'kubeconfig');
  if (name === undefined || name === '')
    unavailable('kubeconfig.current-context', `${file} names no current context; pass options.context`);
  const ctx = entry(root['contexts'], name, 'context', file);
  const clusterName = str(ctx, 'cluster', `kubeconfig.contexts.${name}`);
  const userName = str(ctx, 'user', `kubeconfig.contexts.${name}`);
  if (clusterName === undefined) unavailable(`kubeconfig.contexts.${name}.cluster`, 'is missing');
  const cluster = entry(root['clusters'], clusterName, 'cluster', file);
  const user = userName === undefined ? {} : entry(root['users'], userName, 'user', file);
  const cAt = `kubeconfig.clusters.${clusterName}`;
  const uAt = `kubeconfig.users.${userName ?? ''}`;
  for (const plugin of ['exec', 'auth-provider']) {
    if (user[plugin] !== undefined)
      unavailable(
        `${uAt}.${plugin}`,
        `credential plugins are not supported (they run programs); give the user a token, tokenFile or client certificate`,
      );
  }
  const server = str(cluster, 'server', cAt);
  if (server === undefined || !/^https?:\/\//.test(server))
    unavailable(`${cAt}.server`, `must be an https:// (or http://) URL, got ${JSON.stringify(server)}`);
  const insecure = cluster['insecure-skip-tls-verify'];
  if (insecure !== undefined && typeof insecure !== 'boolean') unavailable(`${cAt}.insecure-skip-tls-verify`, 'must be a boolean');
  const dir = path.dirname(path.resolve(file));
  const tokenFile = str(user, 'tokenFile', uAt);
  const ns = str(ctx, 'namespace', `kubeconfig.contexts.${name}`);
  const cert = await pem(user, 'client-certificate', uAt, dir);
  const key = await pem(user, 'client-key', uAt, dir);
  if ((cert === undefined) !== (key === undefined))
    unavailable(uAt, 'a client certificate needs its key (client-key) and the other way round');
  return {
    server: server.replace(/\/+$/, ''),
    ca: await pem(cluster, 'certificate-authority', cAt, dir),
    cert,
    key,
    token: str(user, 'token', uAt),
    tokenFile: tokenFile === undefined ? undefined : path.resolve(dir, tokenFile),
    insecureSkipTlsVerify: insecure === true,
    tlsServerName: str(cluster, 'tls-server-name', cAt),
    namespace: ns === '' ? undefined : ns,
    origin: `kubeconfig ${file} (context ${name})`,
  };
}

/** The credentials `opts` names: in-cluster, a kubeconfig, or (auto) in-cluster when the pod's environment says so. */
export async function resolveCredentials(opts: CredentialOptions = {}): Promise<KubeCredentials> {
  const mode = opts.credentials ?? 'auto';
  if (mode !== 'auto' && mode !== 'in-cluster' && mode !== 'kubeconfig')
    invalidConfig('options.credentials', 'must be "auto", "in-cluster" or "kubeconfig"', mode);
  if (mode !== 'kubeconfig') {
    const inCluster = await inClusterCredentials(opts);
    if (inCluster !== undefined) return inCluster;
    if (mode === 'in-cluster') unavailable('credentials', 'in-cluster: KUBERNETES_SERVICE_HOST is not set (not running in a pod?)');
  }
  return kubeconfigCredentials(opts.kubeconfig ?? defaultKubeconfig(opts.env), opts.context);
}
