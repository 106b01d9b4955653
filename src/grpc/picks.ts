/**
 * The constant pick results of the `poise` balancer and its reading of a
 * call's metadata (balancer.ts).
 * @internal
 */
import type { experimental, Metadata } from '@grpc/grpc-js';
import * as grpc from '@grpc/grpc-js';

const PickResultType = grpc.experimental.PickResultType;

/** The pick that parks the call until the balancer publishes a picker again. @internal */
export const QUEUE: experimental.PickResult = Object.freeze({
  pickResultType: PickResultType.QUEUE,
  subchannel: null,
  status: null,
  onCallStarted: null,
  onCallEnded: null,
});

/** A pick that ends the call with `code` (`type`: DROP, never retried; TRANSIENT_FAILURE). @internal */
export function statusResult(type: number, code: grpc.status, details: string): experimental.PickResult {
  return {
    pickResultType: type,
    subchannel: null,
    status: { code, details, metadata: new grpc.Metadata() },
    onCallStarted: null,
    onCallEnded: null,
  };
}

/** A leaf's picker before its first state. @internal */
export const QUEUE_PICKER: experimental.Picker = { pick: () => QUEUE };

/** The first value of metadata key `key` as a string (a Buffer value is not a key). */
export function firstString(md: Metadata, key: string): string | undefined {
  const v = md.get(key);
  return v.length > 0 && typeof v[0] === 'string' ? v[0] : undefined;
}
