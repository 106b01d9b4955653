/**
 * The admission controller's families (registered when collectMetrics is
 * given an AdmissionStatsSource): pool saturation, and per band its queue,
 * oldest wait, admissions and rejections. The figures are read once per
 * scrape, into the snapshot.
 * @internal
 */
import type { Family } from '../family.js';
import type { Snapshot } from '../snapshot.js';

const B = ['band'] as const;

/** `QueueFull` → `queue_full` (Prometheus label values are lower snake case by convention). */
function snake(reason: string): string {
  return reason.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase();
}

function bands(s: Snapshot) {
  return s.admission?.bands ?? [];
}

/** The admission families, in exposition order. @internal */
export const ADMISSION_FAMILIES: readonly Family<Snapshot>[] = [
  {
    name: 'admission_saturation_ratio',
    help: 'Pool saturation the admission controller sees (load / capacity).',
    kind: 'gauge',
    labels: [],
    read: (push, s) => {
      if (s.admission?.saturation !== undefined) push({}, s.admission.saturation);
    },
  },
  {
    name: 'admission_queue_length',
    help: 'Requests waiting for admission, per band (its rank).',
    kind: 'gauge',
    labels: B,
    read: (push, s) => {
      for (const b of bands(s)) push({ band: String(b.band) }, b.queued);
    },
  },
  {
    name: 'admission_oldest_wait_seconds',
    help: 'How long the oldest waiter of each band has waited; 0 when its queue is empty.',
    kind: 'gauge',
    labels: B,
    read: (push, s) => {
      for (const b of bands(s)) push({ band: String(b.band) }, b.oldestWaitMs / 1000);
    },
  },
  {
    name: 'admission_admitted_total',
    help: 'Requests admitted, per band.',
    kind: 'counter',
    labels: B,
    read: (push, s) => {
      for (const b of bands(s)) push({ band: String(b.band) }, b.admitted);
    },
  },
  {
    name: 'admission_rejected_total',
    help: 'Requests rejected, per band and reason (QueueFull -> queue_full).',
    kind: 'counter',
    labels: ['band', 'reason'],
    read: (push, s) => {
      for (const b of bands(s))
        for (const [reason, n] of Object.entries(b.rejected)) push({ band: String(b.band), reason: snake(reason) }, n);
    },
  },
];
