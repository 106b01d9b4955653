/** The backends the owner's health machinery watches: one per live slot. @internal */
export interface HealthTarget {
  slot: number;
  generation: number;
  id: string;
  address: string;
  host: string;
  port: number;
  priority: number;
}
