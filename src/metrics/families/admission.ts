/**
 * The admission controller's families (registered when collectMetrics is
 * given an AdmissionStatsSource): pool saturation, and per band its queue,
 * oldest wait, admissions and rejections. The figures are read once per
 * scrape, into the snapshot.
 * @internal
 */
import type { AdmissionBandFigures } from '../../admission/admission-stats.js';
import type { Family } from '../family.js';
import type { Snapshot } from '../snapshot.js';

const B = ['band'] as const;

/** `QueueFull` → `queue_full` (Prometheus label values are lower snake case by convention). */
function snake(reason: string): string {
  return reason.replace(/([a-z0-9])([A-Z])/g, '$1_$2').toLowerCase();
}

function bands(s: Snapshot): readonly AdmissionBandFigures[] {
  return s.admission?.bands ?? [];
}

/** A family with one series per admission band, its value `value(band)`. */
function perBand(name: string, help: string, kind: 'gauge' | 'counter', value: (b: AdmissionBandFigures) => number): Family<Snapshot> {
  return {
    name,
    help,
    kind,
    labels: B,
    read: (push, s) => {
      for (const b of bands(s)) push({ band: String(b.band) }, value(b));
    },
  };
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
  perBand('admission_queue_length', 'Requests waiting for admission, per band (its rank).', 'gauge', (b) => b.queued),
  perBand(
    'admission_oldest_wait_seconds',
    'How long the oldest waiter of each band has waited; 0 when its queue is empty.',
    'gauge',
    (b) => b.oldestWaitMs / 1000,
  ),
  perBand('admission_admitted_total', 'Requests admitted, per band.', 'counter', (b) => b.admitted),
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
