/**
 * The little of the Kubernetes API that discovery needs, on `node:https`:
 * a GET of a JSON object (a list) and a watch, which is a GET whose chunked
 * response is one JSON event per line (`{"type":"ADDED","object":{...}}`),
 * kept open until the server ends it or we drop it.
 *
 * Each request is its own connection (`agent: false`): a watch that is
 * dropped or reset takes nothing else with it, and an API server that
 * restarted is dialled afresh. TLS is verified against the credentials' CA
 * unless the kubeconfig says `insecure-skip-tls-verify: true`.
 *
 * The bearer token of a token file (the in-cluster service account's, which
 * the kubelet rotates) is re-read before a request when the last read is
 * older than `tokenRefreshMs`, and at once after a 401.
 */
import { readFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import { StringDecoder } from 'node:string_decoder';
import type { TimerSource } from '../core/timers.js';
import type { KubeCredentials } from './kube-config.js';

/** What went wrong with one request, by kind (the kinds the source counts). */
export type KubeErrorKind = 'unreachable' | 'timeout' | 'http' | 'malformed' | 'reset' | 'credentials';

/** A failed request: its kind, the HTTP status when there was one, and the reason. */
export class KubeRequestError extends Error {
  readonly kind: KubeErrorKind;
  readonly status: number | undefined;
  constructor(kind: KubeErrorKind, message: string, status?: number, cause?: unknown) {
    super(message, { cause });
    this.kind = kind;
    this.status = status;
  }
}

/** How a watch ended. */
export type WatchEnd =
  /** The server ended the response cleanly (its timeout): watch again from the last resourceVersion. */
  | { kind: 'closed'; lines: number }
  /** We dropped it (`abort`): the reason given. */
  | { kind: 'aborted'; reason: string; lines: number }
  /** It failed: a reset mid-stream, a refused connection, an HTTP status, an over-long line. */
  | { kind: 'failed'; error: KubeRequestError; lines: number };

/** A running watch. */
export interface WatchHandle {
  /** Settles once, when the watch ended (never rejects). */
  readonly end: Promise<WatchEnd>;
  /** Drops the watch; `end` settles with `{ kind: 'aborted', reason }`. */
  abort(reason: string): void;
}

/** Options of {@link KubeClient}. */
export interface KubeClientOptions {
  timers: TimerSource;
  /** Re-read a token file at most this often (ms); default 60000. */
  tokenRefreshMs?: number;
  /** Largest list response, bytes; default 64 MiB. */
  maxListBytes?: number;
  /** Largest watch line (one event), bytes; default 16 MiB. */
  maxLineBytes?: number;
}

/** A client of one API server with one set of credentials. */
export class KubeClient {
  readonly #creds: KubeCredentials;
  readonly #url: URL;
  readonly #timers: TimerSource;
  readonly #tokenRefreshMs: number;
  readonly #maxListBytes: number;
  readonly #maxLineBytes: number;
  #token: string | undefined;
  #tokenReadAt = Number.NEGATIVE_INFINITY;

  constructor(creds: KubeCredentials, opts: KubeClientOptions) {
    this.#creds = creds;
    this.#url = new URL(creds.server);
    this.#timers = opts.timers;
    this.#tokenRefreshMs = opts.tokenRefreshMs ?? 60_000;
    this.#maxListBytes = opts.maxListBytes ?? 64 * 1024 * 1024;
    this.#maxLineBytes = opts.maxLineBytes ?? 16 * 1024 * 1024;
    this.#token = creds.token;
  }

  /** The server, for messages. */
  get server(): string {
    return this.#creds.server;
  }

  /** Forgets the token read from the token file, so the next request re-reads it (after a 401). */
  invalidateToken(): void {
    if (this.#creds.tokenFile !== undefined) this.#tokenReadAt = Number.NEGATIVE_INFINITY;
  }

  async #authorization(): Promise<string | undefined> {
    const file = this.#creds.tokenFile;
    if (file !== undefined && this.#timers.now() - this.#tokenReadAt >= this.#tokenRefreshMs) {
      try {
        this.#token = (await readFile(file, 'utf8')).trim();
        this.#tokenReadAt = this.#timers.now();
      } catch (err) {
        throw new KubeRequestError('credentials', `cannot read the token file ${file} (${(err as Error).message})`, undefined, err);
      }
    }
    return this.#token === undefined || this.#token === '' ? undefined : `Bearer ${this.#token}`;
  }

  async #request(path: string): Promise<http.ClientRequest> {
    const auth = await this.#authorization();
    const u = this.#url;
    const secure = u.protocol === 'https:';
    const c = this.#creds;
    const options: https.RequestOptions = {
      host: u.hostname.replace(/^\[|\]$/g, ''),
      port: u.port === '' ? (secure ? 443 : 80) : Number(u.port),
      path: `${u.pathname.replace(/\/+$/, '')}${path}`,
      method: 'GET',
      agent: false,
      headers: { accept: 'application/json', ...(auth === undefined ? {} : { authorization: auth }) },
    };
    if (secure) {
      options.rejectUnauthorized = !c.insecureSkipTlsVerify;
      if (c.ca !== undefined) options.ca = c.ca;
      if (c.cert !== undefined) options.cert = c.cert;
      if (c.key !== undefined) options.key = c.key;
      if (c.tlsServerName !== undefined) options.servername = c.tlsServerName;
    }
    return (secure ? https : http).request(options);
  }

  /** GETs `path` and parses the JSON body; rejects with {@link KubeRequestError}. */
  async get(path: string, timeoutMs: number): Promise<unknown> {
    const req = await this.#request(path);
    return new Promise((resolve, reject) => {
      let done = false;
      const timer = this.#timers.setTimeout(
        () => fail(new KubeRequestError('timeout', `no answer from ${this.server} within ${timeoutMs} ms`)),
        timeoutMs,
      );
      const fail = (err: KubeRequestError): void => {
        if (done) return;
        done = true;
        this.#timers.clearTimeout(timer);
        req.destroy();
        reject(err);
      };
      req.on('error', (err) => fail(networkError(this.server, err)));
      req.on('response', (res) => {
        const chunks: Buffer[] = [];
        let bytes = 0;
        res.on('data', (chunk: Buffer) => {
          bytes += chunk.length;
          if (bytes > this.#maxListBytes)
            fail(new KubeRequestError('malformed', `the answer of ${this.server} exceeds ${this.#maxListBytes} bytes`));
          else chunks.push(chunk);
        });
        res.on('error', (err) => fail(networkError(this.server, err)));
        res.on('end', () => {
          if (done) return;
          const text = Buffer.concat(chunks).toString('utf8');
          const status = res.statusCode ?? 0;
          if (status !== 200) return fail(statusError(this.server, status, text));
          let value: unknown;
          try {
            value = JSON.parse(text);
          } catch (err) {
            return fail(
              new KubeRequestError('malformed', `the answer of ${this.server} is not JSON (${(err as Error).message})`, 200, err),
            );
          }
          done = true;
          this.#timers.clearTimeout(timer);
          resolve(value);
        });
      });
      req.end();
    });
  }

  /**
   * Watches `path`: `onLine` receives each complete line's parsed JSON (or
   * the parse error), `onData` every chunk (the stall watchdog's heartbeat).
   * A partial line at the end of a reset stream is dropped, never parsed.
   */
  watch(path: string, onLine: (value: unknown, error?: Error) => void, onData: () => void): WatchHandle {
    let abort: (reason: string) => void = () => {};
    const end = new Promise<WatchEnd>((resolve) => {
      let lines = 0;
      let settled = false;
      let req: http.ClientRequest | undefined;
      let aborted: string | undefined;
      const settle = (e: WatchEnd): void => {
        if (settled) return;
        settled = true;
        req?.destroy();
        resolve(e);
      };
      const failed = (error: KubeRequestError): void =>
        settle(aborted !== undefined ? { kind: 'aborted', reason: aborted, lines } : { kind: 'failed', error, lines });
      abort = (reason) => {
        aborted ??= reason;
        settle({ kind: 'aborted', reason, lines });
      };
      this.#request(path).then(
        (r) => {
          req = r;
          r.on('error', (err) => failed(networkError(this.server, err)));
          if (settled) return void r.destroy();
          r.on('response', (res) => {
            const status = res.statusCode ?? 0;
            if (status !== 200) {
              let body = '';
              res.setEncoding('utf8');
              res.on('data', (d: string) => {
                if (body.length < 65536) body += d;
              });
              res.on('end', () => failed(statusError(this.server, status, body)));
              res.on('error', (err) => failed(networkError(this.server, err)));
              return;
            }
            const decoder = new StringDecoder('utf8');
            let partial = '';
            res.on('data', (chunk: Buffer) => {
              if (settled) return;
              onData();
              let text = partial + decoder.write(chunk);
              let nl = text.indexOf('\n');
              while (nl >= 0 && !settled) {
                const line = text.slice(0, nl).trim();
                text = text.slice(nl + 1);
                if (line !== '') {
                  lines++;
                  let value: unknown;
                  let error: Error | undefined;
                  try {
                    value = JSON.parse(line);
                  } catch (err) {
                    error = err as Error;
                  }
                  onLine(value, error);
                }
                nl = text.indexOf('\n');
              }
              partial = text;
              if (partial.length > this.#maxLineBytes)
                failed(new KubeRequestError('malformed', `a watch event of ${this.server} exceeds ${this.#maxLineBytes} bytes`));
            });
            res.on('error', (err) => failed(networkError(this.server, err)));
            res.on('close', () => {
              // A stream that ends mid-line, or without its terminating chunk, was cut: its partial event is dropped.
              if (!res.complete || partial.trim() !== '')
                failed(new KubeRequestError('reset', `the watch of ${this.server} was cut mid-stream (a partial event dropped)`));
              else settle({ kind: 'closed', lines });
            });
          });
          r.end();
        },
        (err: KubeRequestError) => failed(err),
      );
    });
    return { end, abort: (reason) => abort(reason) };
  }
}

function networkError(server: string, err: Error): KubeRequestError {
  const code = (err as NodeJS.ErrnoException).code ?? '';
  const kind = code === 'ECONNRESET' || code === 'EPIPE' || err.message === 'aborted' ? 'reset' : 'unreachable';
  return new KubeRequestError(kind, `${server}: ${code === '' ? err.message : `${code} ${err.message}`}`, undefined, err);
}

/** An HTTP error status, with the API's Status message when the body is one. */
function statusError(server: string, status: number, body: string): KubeRequestError {
  let message = body.slice(0, 200);
  try {
    const s = JSON.parse(body) as { message?: unknown };
    if (typeof s.message === 'string') message = s.message;
  } catch {
    // not a Status object: the start of the body is the message
  }
  return new KubeRequestError('http', `${server} answered ${status}${message === '' ? '' : `: ${message}`}`, status);
}
