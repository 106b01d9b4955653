/**
 * A RedisMembership's local copies, what it runs from while Redis is
 * unavailable at start: the last known snapshot (a file it rewrites
 * atomically after every applied version, or one held in memory) and the
 * operator's fallback document file.
 */
import { mkdir, rename, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { invalidConfig, isPoiseError } from '../core/errors.js';
import { documentJson, formatOf, parseDocument, type ResolvedDocument } from './document.js';
import { readFileLimited } from './read-limited.js';
import { decodeEnvelope, envelopeJson, type Envelope } from './redis-keys.js';

/** The last known snapshot of `cluster`: decoded from memory, or read from its file (undefined when the file does not exist yet). @internal */
export async function readLastKnown(
  lk: string | { version: number; lineage?: string; document: unknown },
  cluster: string,
  maxBytes: number,
): Promise<Envelope | undefined> {
  if (typeof lk !== 'string') return decodeEnvelope(JSON.stringify(lk), { cluster, maxBytes, what: 'snapshot' });
  let text: string;
  try {
    text = await readFileLimited(lk, maxBytes, 'lastKnown');
  } catch (err) {
    if (isPoiseError(err, 'NotFound')) return undefined;
    throw err;
  }
  return decodeEnvelope(text, { cluster, maxBytes, what: 'snapshot' });
}

/** The fallback document file of `cluster`, as an envelope of version `document.version` (0 when it names none) and no lineage. @internal */
export async function readFallback(file: string, cluster: string, maxBytes: number): Promise<Envelope> {
  const text = await readFileLimited(file, maxBytes, 'fallbackFile');
  const document: ResolvedDocument = parseDocument(text, { format: formatOf(file), maxBytes });
  if (document.cluster !== cluster) {
    invalidConfig('fallbackFile.cluster', `must be ${JSON.stringify(cluster)}`, document.cluster);
  }
  // A versionless fallback is version 0; it has no lineage, so the first Redis snapshot replaces it whatever its version.
  return { version: document.version ?? 0, lineage: undefined, document };
}

/** The last known snapshot file's text for an applied version. @internal */
export function lastKnownText(version: number, lineage: string | undefined, document: ResolvedDocument): string {
  return `${envelopeJson(version, lineage, documentJson(document))}\n`;
}

/** Replaces `file` with `text` atomically (a crash leaves the old or the new file, never half of one), making its folder. @internal */
export async function replaceFile(file: string, text: string): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, text);
  await rename(tmp, file);
}
