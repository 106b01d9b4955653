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
