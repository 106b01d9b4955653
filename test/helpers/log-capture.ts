/** A pino logger that keeps its records in memory, so tests can assert what was logged. */
import { pino, type Logger } from 'pino';

export interface CapturedLog {
  logger: Logger;
  records: Record<string, unknown>[];
  /** Records whose `msg` contains `text`. */
  find(text: string): Record<string, unknown>[];
}

export function captureLog(level = 'debug'): CapturedLog {
  const records: Record<string, unknown>[] = [];
  const logger = pino({ level }, { write: (line: string) => void records.push(JSON.parse(line) as Record<string, unknown>) });
  return { logger, records, find: (text) => records.filter((r) => String(r['msg']).includes(text)) };
}

/** Polls `probe` until it returns true or `deadlineMs` passes (for external events only). */
export async function until(probe: () => boolean | Promise<boolean>, what: string, deadlineMs = 15_000): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (Date.now() < deadline) {
    if (await probe()) return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`timed out after ${deadlineMs} ms waiting for ${what}`);
}
