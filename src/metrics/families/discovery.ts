/**
 * The discovery source's families (registered when the membership source
 * keeps a discovery status): its last good answer, errors by kind, the
 * records in force and its state. One writer (the source) keeps the status
 * (src/discovery/status.ts); it is read here at scrape time.
 * @internal
 */
import { DISCOVERY_ERROR_KINDS, type DiscoveryStatus } from '../../discovery/status.js';
import type { Family } from '../family.js';
import type { Snapshot } from '../snapshot.js';

/** What the discovery families read: the scrape's snapshot (its cluster) and the source's status. @internal */
export interface DiscoveryView {
  readonly s: Snapshot;
  readonly status: DiscoveryStatus;
}

const DL = ['cluster', 'source'] as const;

/** The discovery families, in exposition order. @internal */
export const DISCOVERY_FAMILIES: readonly Family<DiscoveryView>[] = [
  {
    name: 'discovery_last_success_timestamp_seconds',
    help: "Unix time of the discovery source's last good answer; 0 before the first.",
    kind: 'gauge',
    labels: DL,
    read: (push, { s, status }) => push({ cluster: s.cluster, source: status.source }, status.lastSuccessMs / 1000),
  },
  {
    name: 'discovery_errors_total',
    help: 'Failed discovery queries, by kind (the last good membership stayed in force).',
    kind: 'counter',
    labels: [...DL, 'kind'],
    read: (push, { s, status }) => {
      for (const kind of DISCOVERY_ERROR_KINDS) push({ cluster: s.cluster, source: status.source, kind }, status.errors[kind]);
    },
  },
  {
    name: 'discovery_records',
    help: 'Backends in the membership in force from the discovery source (its last good answer).',
    kind: 'gauge',
    labels: DL,
    read: (push, { s, status }) => push({ cluster: s.cluster, source: status.source }, status.records),
  },
  {
    name: 'discovery_state',
    help: "The discovery source's state: 1 for the one it is in (ok, stale: last good kept, failing: none yet).",
    kind: 'gauge',
    labels: [...DL, 'state'],
    read: (push, { s, status }) => {
      for (const state of ['ok', 'stale', 'failing'] as const)
        push({ cluster: s.cluster, source: status.source, state }, status.state === state ? 1 : 0);
    },
  },
];
