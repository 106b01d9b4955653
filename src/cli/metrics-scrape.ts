/**
 * One scrape of a Prometheus endpoint for `poise top`, bounded in time and
 * size: one deadline covers the request, the body and the parse (a server
 * that trickles its body, or a body that is slow to parse, ends at the
 * deadline), and the body is refused past `maxBytes` while it is read, so
 * neither a slow nor a huge answer can hold the command.
 */
import { isPoiseError, PoiseError } from '../core/errors.js';
import { readStreamLimited } from '../membership/read-limited.js';
import { parseMetricsText, type MetricFamily } from '../metrics/text-format.js';

/** Limits of one scrape. */
export interface ScrapeLimits {
  /** The one deadline, from the request to the end of the parse, ms. */
  timeoutMs: number;
  /** The largest body accepted, bytes. */
  maxBytes: number;
  /** The clock the parse reads the deadline against; default `Date.now` (tests inject one). */
  now?: () => number;
}

function detail(err: unknown): string {
  return err instanceof Error ? (err.cause instanceof Error ? err.cause.message : err.message) : String(err);
}

/**
 * Fetches `url` and parses it. Throws `PoiseError` naming `--metrics`:
 * `Unavailable` when the endpoint cannot be reached, answers other than
 * 200, or the deadline passes ("did not answer within N ms"); `InvalidConfig`
 * when the body exceeds `maxBytes` ("exceeds the limit of N bytes");
 * `Corrupt` from the parser for a body that is not the text format.
 */
export async function scrapeMetrics(url: string, limits: ScrapeLimits): Promise<Map<string, MetricFamily>> {
  const now = limits.now ?? Date.now;
  const deadline = now() + limits.timeoutMs;
  const signal = AbortSignal.timeout(limits.timeoutMs);
  const late = (cause: unknown): PoiseError =>
    new PoiseError(
      'Unavailable',
      `--metrics: ${url} did not answer within ${limits.timeoutMs} ms (--timeout covers the request, the body and the parse)`,
      { field: '--metrics', cause },
    );
  const failed = (cause: unknown): PoiseError =>
    new PoiseError('Unavailable', `--metrics: cannot scrape ${url}: ${detail(cause)}`, { field: '--metrics', cause });
  let text: string;
  try {
    const res = await fetch(url, { signal });
    if (res.status !== 200) {
      await res.body?.cancel();
      throw new PoiseError('Unavailable', `--metrics: ${url} answered ${res.status}`, { field: '--metrics' });
    }
    // The response's own signal aborts the body read at the deadline too.
    text = res.body === null ? '' : await readStreamLimited(res.body, limits.maxBytes, '--metrics', `the body of ${url}`);
  } catch (err) {
    if (isPoiseError(err)) throw err;
    throw signal.aborted ? late(err) : failed(err);
  }
  try {
    return parseMetricsText(text, { deadline, now });
  } catch (err) {
    throw isPoiseError(err, 'Unavailable') ? late(err) : err;
  }
}
