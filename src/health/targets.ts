/** The backends the owner's health machinery watches: one per live slot. @internal */
export interface HealthTarget {
  slot: number;
  generation: number;
  id: string;
  address: string;
  host: string;
  port: number;
  priority: number;
  /** The spec's configured database role (what the role word returns to when a roles check stops). */
  role: 'none' | 'primary' | 'replica';
}
