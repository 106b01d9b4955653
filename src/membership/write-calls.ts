/**
 * How the publisher talks to the write script (redis-script.ts): its
 * arguments in order, the fenced form, its reply, and its error replies
 * (`POISE_STALE`, `POISE_CEILING`, ...) as PoiseError codes.
 */
import { PoiseError } from '../core/errors.js';
import { MAX_VERSION } from './document.js';
import type { RedisClient } from './redis-target.js';

/** What the script answered: written (new version, lineage), or the expected version did not match. @internal */
export type WriteReply =
  | { written: true; version: number; lineage: string; notice: 'delta' | 'full' }
  | { written: false; current: string };
/** Delta ops computed against a stored document (its lineage), for the script's ARGV[9..11]. @internal */
export interface DeltaArgs {
  ops: string;
  lineage: string;
}
/** The script's keys and ARGV[1..11], in order (redis-script.ts). @internal */
export type WriteArgs = [
  key: string,
  channel: string,
  publish: string,
  doc: string,
  expected: string,
  requested: string,
  lineage: string,
  max: string,
  floor: string,
  floorLineage: string,
  ops: string,
  digest: string,
  opsLineage: string,
];
/** A fencing token and the lease key it must be held under (the fleet watcher's: redis-lease.ts). */
export interface WriteFence {
  /** The lease key (redis-keys.ts, `watcherKeys`). */
  readonly key: string;
  /** The token the lease must be held under. */
  readonly token: number;
}
/** {@link WriteArgs} with the lease key as KEYS[3] and the token as ARGV[12]. @internal */
export type FencedArgs = [key: string, channel: string, lease: string, ...rest: string[]];
/** The publisher's client with the write script defined on it, plain and fenced. @internal */
export type ScriptClient = RedisClient & {
  poiseWrite(...args: WriteArgs): Promise<unknown>;
  poiseWriteFenced(...args: FencedArgs): Promise<unknown>;
};

/** A version written by the script, as its digits: exact, and inside [0, 2^53 − 1] or refused. @internal */
export function versionFromReply(text: unknown): number {
  const n = typeof text === 'string' && /^\d{1,16}$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isSafeInteger(n))
    throw new PoiseError('Corrupt', `version: the script answered ${JSON.stringify(text)}, not a version in [0, ${MAX_VERSION}]`, {
      field: 'version',
    });
  return n;
}

/** The write script's arguments with the lease key as KEYS[3] and the token as ARGV[12]. @internal */
export function fencedArgs(args: WriteArgs, fence: WriteFence): FencedArgs {
  const [key, channel, ...argv] = args;
  return [key, channel, fence.key, ...argv, String(fence.token)];
}

/** The script's reply: written (version, lineage, the notice sent) or a conflict (the stored version). @internal */
export function parseReply(reply: unknown): WriteReply {
  if (Array.isArray(reply) && reply[0] === '1' && typeof reply[2] === 'string')
    return { written: true, version: versionFromReply(reply[1]), lineage: reply[2], notice: reply[3] === 'delta' ? 'delta' : 'full' };
  if (Array.isArray(reply) && reply[0] === '0' && typeof reply[1] === 'string') return { written: false, current: reply[1] };
  throw new PoiseError('Corrupt', `redis: unexpected reply from the write script: ${JSON.stringify(reply)}`, { field: 'redis' });
}

/** The PoiseError a script error reply stands for, or undefined when `message` is none of the script's (Redis itself failed). @internal */
export function scriptErrorReply(message: string): PoiseError | undefined {
  const stale = /POISE_STALE (\d+) (\d+)/.exec(message);
  if (stale !== null) {
    return new PoiseError('Conflict', `version: ${stale[1]} is not newer than the stored version ${stale[2]}; nothing written`, {
      field: 'version',
    });
  }
  const ceiling = /POISE_CEILING (\d+)/.exec(message);
  if (ceiling !== null) {
    return new PoiseError(
      'CapacityExhausted',
      `version: the stored version ${ceiling[1]} has reached the ceiling ${MAX_VERSION}; nothing written (delete the snapshot key to start a new lineage from version 1)`,
      { field: 'version' },
    );
  }
  const range = /POISE_RANGE (\d+)/.exec(message);
  if (range !== null)
    return new PoiseError('InvalidConfig', `version: must be an integer in [0, ${MAX_VERSION}], got ${range[1]}; nothing written`, {
      field: 'version',
    });
  const fenced = /POISE_FENCED (\d+) (\w+)/.exec(message);
  if (fenced !== null)
    return new PoiseError(
      'Conflict',
      `fence: token ${fenced[1]} is stale (the watcher lease is held under ${fenced[2]}); nothing written`,
      { field: 'fence' },
    );
  const malformed = /POISE_MALFORMED (.*)/.exec(message);
  if (malformed !== null) return new PoiseError('Corrupt', `snapshot: ${malformed[1]}; nothing written`, { field: 'snapshot' });
  return undefined;
}
