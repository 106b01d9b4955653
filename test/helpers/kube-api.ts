/**
 * A Kubernetes API server for tests: the list and watch of
 * `discovery.k8s.io/v1` EndpointSlices, following the API's documented wire
 * behaviour (no real kube-apiserver ships as a Debian package; see
 * docs/membership.md):
 *
 * - every change moves one cluster-wide resourceVersion (an integer, sent as
 *   a string) and is kept in a history; a list answers the slices that match
 *   `labelSelector=kubernetes.io/service-name=<svc>` with the current
 *   resourceVersion, in pages when asked for a `limit` (`continue` tokens);
 * - `?watch=1&resourceVersion=RV` answers 200 with a chunked body, one JSON
 *   event per line: every change after RV from the history, then each new one
 *   (ADDED / MODIFIED / DELETED), BOOKMARKs when the test asks
 *   (`allowWatchBookmarks`), and ERROR events;
 * - a resourceVersion older than the compacted history gets 410 Gone: as an
 *   ERROR event with `code: 410` (the API's usual answer on a watch) or as an
 *   HTTP 410 status (`gone: 'status'`);
 * - the bearer token is checked (401 with a Status object otherwise), over
 *   TLS with a test certificate (and optionally a client certificate).
 *
 * Faults a test injects: `silence()` (open watches get nothing more, the
 * connection stays up), `cutNextEvent()` (the next event is written half way
 * and the connection destroyed: a reset mid-event), `endWatches()` (the
 * server's own timeout), `failNext(n, status)`, `rawLine()` (a malformed
 * line), `stopListening()` / `listen()` (unreachable, then back on the same
 * port). Counts: lists, watches, open watches, connections.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import https from 'node:https';
import type { Socket } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { selfSignedCert } from './redis-server.js';
import { until } from './until.js';

/** One endpoint as a test writes it. */
export interface TestEndpoint {
  ip: string;
  ready?: boolean;
  serving?: boolean;
  terminating?: boolean;
  zone?: string;
}

interface Watch {
  ns: string;
  service: string;
  res: http.ServerResponse;
  silent: boolean;
}

interface Event {
  rv: number;
  type: 'ADDED' | 'MODIFIED' | 'DELETED';
  ns: string;
  service: string;
  object: Record<string, unknown>;
}

/** Options of {@link startKubeApi}. */
export interface KubeApiOptions {
  /** HTTPS with a test certificate (default true); false: plain HTTP. */
  tls?: boolean;
  /** Require a client certificate (its PEM is in `clientCert`). */
  clientCert?: boolean;
  /** Accepted bearer tokens; default ['test-token']. An empty list accepts anything (no token needed). */
  tokens?: string[];
  /** How a too-old watch is refused: an ERROR event (default) or an HTTP 410. */
  gone?: 'event' | 'status';
}

/** A running test API server. */
export class TestKubeApi {
  readonly dir: string;
  readonly ca: string | undefined;
  readonly clientCert: { cert: string; key: string } | undefined;
  /** Accepted bearer tokens (a test may change it: token rotation). */
  tokens: Set<string>;
  gone: 'event' | 'status';
  readonly counts = { lists: 0, watches: 0, requests: 0, connections: 0, unauthorized: 0 };
  /** The path and query of every request, in order. */
  readonly log: string[] = [];
  #server: http.Server;
  #port = 0;
  #rv = 1;
  #compacted = 0;
  readonly #slices = new Map<string, { ns: string; service: string; object: Record<string, unknown> }>();
  readonly #history: Event[] = [];
  readonly #watches = new Set<Watch>();
  readonly #sockets = new Set<Socket>();
  #failures: { n: number; status: number } | undefined;
  #cut = false;
  readonly #tls: boolean;

  constructor(opts: KubeApiOptions) {
    this.dir = mkdtempSync(path.join(os.tmpdir(), 'poise-kube-'));
    this.#tls = opts.tls !== false;
    this.tokens = new Set(opts.tokens ?? ['test-token']);
    this.gone = opts.gone ?? 'event';
    const handler = (req: http.IncomingMessage, res: http.ServerResponse): void => this.#handle(req, res);
    if (this.#tls) {
      const { cert, key, pem } = selfSignedCert(this.dir);
      this.ca = pem;
      let client: { cert: string; key: string; pem: string } | undefined;
      if (opts.clientCert) {
        client = selfSignedCert(mkdtempSync(path.join(this.dir, 'client-')));
        this.clientCert = { cert: client.cert, key: client.key };
      }
      this.#server = https.createServer(
        {
          cert: readFileSync(cert),
          key: readFileSync(key),
          ...(client === undefined ? {} : { requestCert: true, rejectUnauthorized: true, ca: client.pem }),
        },
        handler,
      );
    } else {
      this.ca = undefined;
      this.#server = http.createServer(handler);
    }
    this.#server.on(this.#tls ? 'secureConnection' : 'connection', (s: Socket) => {
      this.counts.connections++;
      this.#sockets.add(s);
      s.on('close', () => this.#sockets.delete(s));
    });
  }

  /** `https://127.0.0.1:<port>` (or http). */
  get url(): string {
    return `${this.#tls ? 'https' : 'http'}://127.0.0.1:${this.#port}`;
  }

  get port(): number {
    return this.#port;
  }

  /** The current resourceVersion. */
  get resourceVersion(): number {
    return this.#rv;
  }

  /** Watches open now (a silenced one counts while its connection is up). */
  get openWatches(): number {
    return this.#watches.size;
  }

  /** Listens on `port` (default: the one it had, or a free one). */
  listen(port = this.#port): Promise<void> {
    return new Promise((resolve, reject) => {
      this.#server.once('error', reject);
      this.#server.listen(port, '127.0.0.1', () => {
        this.#server.off('error', reject);
        this.#port = (this.#server.address() as { port: number }).port;
        resolve();
      });
    });
  }

  /** Stops listening and destroys every connection (the API server is unreachable until {@link listen}). */
  async stopListening(): Promise<void> {
    for (const w of this.#watches) w.res.destroy();
    this.#watches.clear();
    for (const s of this.#sockets) s.destroy();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  /** Stops everything and removes the certificate folder. */
  async stop(): Promise<void> {
    if (this.#server.listening) await this.stopListening();
    rmSync(this.dir, { recursive: true, force: true });
  }

  /**
   * Creates or replaces the slice `name` of `service` in `ns` (an ADDED or
   * MODIFIED event); returns its resourceVersion.
   */
  setSlice(
    ns: string,
    name: string,
    service: string,
    endpoints: readonly TestEndpoint[],
    ports: readonly { name?: string; port?: number }[] = [{ name: 'http', port: 8080 }],
    addressType = 'IPv4',
  ): number {
    const object = {
      apiVersion: 'discovery.k8s.io/v1',
      kind: 'EndpointSlice',
      metadata: { name, namespace: ns, labels: { 'kubernetes.io/service-name': service }, resourceVersion: '' },
      addressType,
      ports: ports.map((p) => ({ protocol: 'TCP', ...p })),
      endpoints: endpoints.map((e) => ({
        addresses: [e.ip],
        conditions: {
          ...(e.ready === undefined ? {} : { ready: e.ready }),
          ...(e.serving === undefined ? {} : { serving: e.serving }),
          ...(e.terminating === undefined ? {} : { terminating: e.terminating }),
        },
        ...(e.zone === undefined ? {} : { zone: e.zone }),
        targetRef: { kind: 'Pod', name: `pod-${e.ip.replace(/[.:]/g, '-')}`, namespace: ns },
      })),
    };
    return this.setObject(ns, name, service, object);
  }

  /** Creates or replaces a slice with any object (a malformed one, say). */
  setObject(ns: string, name: string, service: string, object: Record<string, unknown>): number {
    const key = `${ns}/${name}`;
    const type = this.#slices.has(key) ? 'MODIFIED' : 'ADDED';
    const rv = ++this.#rv;
    const meta = (object['metadata'] ?? {}) as Record<string, unknown>;
    const stored = { ...object, metadata: { ...meta, resourceVersion: String(rv) } };
    this.#slices.set(key, { ns, service, object: stored });
    this.#emit({ rv, type, ns, service, object: stored });
    return rv;
  }

  /** Deletes a slice (a DELETED event). */
  deleteSlice(ns: string, name: string): number {
    const key = `${ns}/${name}`;
    const held = this.#slices.get(key);
    if (held === undefined) throw new Error(`no slice ${key}`);
    this.#slices.delete(key);
    const rv = ++this.#rv;
    this.#emit({
      rv,
      type: 'DELETED',
      ns,
      service: held.service,
      object: { ...held.object, metadata: { ...(held.object['metadata'] as object), resourceVersion: String(rv) } },
    });
    return rv;
  }

  /** Sends a BOOKMARK with the current resourceVersion to every open (not silenced) watch. */
  bookmark(): void {
    const line = JSON.stringify({
      type: 'BOOKMARK',
      object: { kind: 'EndpointSlice', apiVersion: 'discovery.k8s.io/v1', metadata: { resourceVersion: String(this.#rv) } },
    });
    for (const w of this.#watches) if (!w.silent) w.res.write(`${line}\n`);
  }

  /** Forgets the history up to now: a watch from an older resourceVersion gets 410 Gone. */
  compact(): void {
    this.#compacted = this.#rv;
    this.#history.length = 0;
  }

  /** Sends every open watch an ERROR event with code 410 and ends it (the API's "too old resource version"). */
  expireWatches(): void {
    for (const w of [...this.#watches]) {
      w.res.end(`${goneLine(this.#rv)}\n`);
      this.#watches.delete(w);
    }
  }

  /** Open watches get nothing more (their connections stay up): the informer's silent stop. */
  silence(): void {
    for (const w of this.#watches) w.silent = true;
  }

  /** The next event is written half way to every open watch, whose connection is then destroyed. */
  cutNextEvent(): void {
    this.#cut = true;
  }

  /** Ends every open watch cleanly (what the server's watch timeout does). */
  endWatches(): void {
    for (const w of [...this.#watches]) {
      w.res.end();
      this.#watches.delete(w);
    }
  }

  /** The next `n` requests are answered `status` (a Status object). */
  failNext(n: number, status: number): void {
    this.#failures = { n, status };
  }

  /** Writes `line` (anything) to every open watch. */
  rawLine(line: string): void {
    for (const w of this.#watches) if (!w.silent) w.res.write(`${line}\n`);
  }

  /** Waits until `n` watches are open. */
  async watching(n = 1): Promise<void> {
    await until(() => this.openWatches >= n, `${n} open watches at the test API server`);
  }

  #emit(e: Event): void {
    this.#history.push(e);
    const line = JSON.stringify({ type: e.type, object: e.object });
    const cut = this.#cut;
    this.#cut = false;
    for (const w of [...this.#watches]) {
      if (w.silent || w.ns !== e.ns || w.service !== e.service) continue;
      if (cut) {
        w.res.write(line.slice(0, Math.floor(line.length / 2)));
        this.#watches.delete(w);
        // Give the half line to the socket first, then reset the connection.
        setImmediate(() => w.res.socket?.destroy());
      } else w.res.write(`${line}\n`);
    }
  }

  #status(res: http.ServerResponse, code: number, message: string): void {
    res.writeHead(code, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', message, code }));
  }

  #handle(req: http.IncomingMessage, res: http.ServerResponse): void {
    this.counts.requests++;
    this.log.push(req.url ?? '');
    const u = new URL(req.url ?? '/', 'http://x');
    if (this.tokens.size > 0) {
      const auth = req.headers.authorization ?? '';
      if (!auth.startsWith('Bearer ') || !this.tokens.has(auth.slice(7))) {
        this.counts.unauthorized++;
        this.#status(res, 401, 'Unauthorized');
        return;
      }
    }
    const f = this.#failures;
    if (f !== undefined && f.n > 0) {
      f.n--;
      this.#status(res, f.status, `injected failure ${f.status}`);
      return;
    }
    const m = /^\/apis\/discovery\.k8s\.io\/v1\/namespaces\/([^/]+)\/endpointslices$/.exec(u.pathname);
    const selector = /^kubernetes\.io\/service-name=(.+)$/.exec(u.searchParams.get('labelSelector') ?? '');
    if (m === null || selector === null) {
      this.#status(res, 404, `not found: ${u.pathname}`);
      return;
    }
    const ns = m[1]!;
    const service = selector[1]!;
    if (u.searchParams.get('watch') === '1' || u.searchParams.get('watch') === 'true') {
      this.#watch(res, ns, service, u);
      return;
    }
    this.counts.lists++;
    const items = [...this.#slices.values()].filter((s) => s.ns === ns && s.service === service).map((s) => s.object);
    const limit = Number(u.searchParams.get('limit') ?? '0');
    const cont = u.searchParams.get('continue');
    let offset = 0;
    let rv = String(this.#rv);
    if (cont !== null) {
      const token = JSON.parse(Buffer.from(cont, 'base64').toString('utf8')) as { rv: string; offset: number };
      offset = token.offset;
      rv = token.rv;
    }
    const page = limit > 0 ? items.slice(offset, offset + limit) : items.slice(offset);
    const next =
      limit > 0 && offset + limit < items.length
        ? Buffer.from(JSON.stringify({ rv, offset: offset + limit })).toString('base64')
        : undefined;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(
      JSON.stringify({
        kind: 'EndpointSliceList',
        apiVersion: 'discovery.k8s.io/v1',
        metadata: { resourceVersion: rv, ...(next === undefined ? {} : { continue: next }) },
        items: page,
      }),
    );
  }

  #watch(res: http.ServerResponse, ns: string, service: string, u: URL): void {
    this.counts.watches++;
    const from = Number(u.searchParams.get('resourceVersion') ?? '0');
    if (from < this.#compacted) {
      if (this.gone === 'status') {
        this.#status(res, 410, `too old resource version: ${from} (${this.#compacted})`);
        return;
      }
      res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
      res.end(`${goneLine(from)}\n`);
      return;
    }
    res.writeHead(200, { 'content-type': 'application/json', 'transfer-encoding': 'chunked' });
    res.flushHeaders();
    const w: Watch = { ns, service, res, silent: false };
    this.#watches.add(w);
    res.on('close', () => this.#watches.delete(w));
    for (const e of this.#history) {
      if (e.rv > from && e.ns === ns && e.service === service) res.write(`${JSON.stringify({ type: e.type, object: e.object })}\n`);
    }
  }
}

function goneLine(rv: number): string {
  return JSON.stringify({
    type: 'ERROR',
    object: {
      kind: 'Status',
      apiVersion: 'v1',
      status: 'Failure',
      message: `too old resource version: ${rv}`,
      reason: 'Expired',
      code: 410,
    },
  });
}

/** Starts a test API server on a free loopback port. */
export async function startKubeApi(opts: KubeApiOptions = {}): Promise<TestKubeApi> {
  const api = new TestKubeApi(opts);
  await api.listen(0);
  return api;
}

/**
 * Writes a kubeconfig for `api` into its folder (current context `test`);
 * returns its path. `token` (default 'test-token') or, with `tokenFile`,
 * a token file; the CA as a file path or inline data.
 */
export function writeKubeconfig(
  api: TestKubeApi,
  opts: { token?: string; tokenFile?: string; caInline?: boolean; insecure?: boolean; namespace?: string; noCa?: boolean } = {},
): string {
  const caFile = path.join(api.dir, 'kube-ca.crt');
  const lines = [
    'apiVersion: v1',
    'kind: Config',
    'current-context: test',
    'clusters:',
    '- name: c',
    '  cluster:',
    `    server: ${api.url}`,
  ];
  if (api.ca !== undefined && opts.noCa !== true) {
    writeFileSync(caFile, api.ca);
    if (opts.caInline) lines.push(`    certificate-authority-data: ${Buffer.from(api.ca).toString('base64')}`);
    else lines.push('    certificate-authority: kube-ca.crt');
  }
  if (opts.insecure) lines.push('    insecure-skip-tls-verify: true');
  lines.push('users:', '- name: u', '  user:');
  if (opts.tokenFile !== undefined) lines.push(`    tokenFile: ${opts.tokenFile}`);
  else lines.push(`    token: ${opts.token ?? 'test-token'}`);
  if (api.clientCert !== undefined) lines.push(`    client-certificate: ${api.clientCert.cert}`, `    client-key: ${api.clientCert.key}`);
  lines.push('contexts:', '- name: test', '  context:', '    cluster: c', '    user: u');
  if (opts.namespace !== undefined) lines.push(`    namespace: ${opts.namespace}`);
  const file = path.join(api.dir, 'kubeconfig.yaml');
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

/** Writes a service-account folder (token, ca.crt, namespace) for `api`; returns it and the env that points at the server. */
export function writeServiceAccount(api: TestKubeApi, token: string, namespace = 'default'): { dir: string; env: Record<string, string> } {
  const dir = mkdtempSync(path.join(api.dir, 'sa-'));
  writeFileSync(path.join(dir, 'token'), token);
  if (api.ca !== undefined) writeFileSync(path.join(dir, 'ca.crt'), api.ca);
  writeFileSync(path.join(dir, 'namespace'), namespace);
  return { dir, env: { KUBERNETES_SERVICE_HOST: '127.0.0.1', KUBERNETES_SERVICE_PORT: String(api.port) } };
}
