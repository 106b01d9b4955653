/**
 * The fleet connection budget's options (a Balancer's `connectionBudget`, a
 * membership document's, FleetConnectionBudget's own) and their validation.
 * Where Redis is and which cluster come from the FleetConnectionBudget that
 * runs the rounds (docs/connection-budget.md).
 */
import { checkOptionKeys, invalidConfig } from '../core/errors.js';
import { integerIn } from '../core/validate.js';

/** The limit a fleet shares per backend. */
export interface ConnectionBudgetOptions {
  /** The connections each backend accepts from the whole fleet (PostgreSQL `max_connections`), an integer in [1, 1000000]. */
  limitPerBackend: number;
  /** Connections of the limit kept out of the split (superuser, migrations, monitoring); default 0, below the limit. */
  reserve?: number;
  /** A process that stops renewing loses its shares after this long, ms, in [300, 3600000]; default 10,000. */
  ttlMs?: number;
}

/** Validated connection budget options. @internal */
export interface ResolvedConnectionBudget {
  limitPerBackend: number;
  reserve: number;
  ttlMs: number;
}

/** Validates connection budget options (`field` names them); undefined or `false` is none. @internal */
export function resolveConnectionBudget(value: unknown, field: string): ResolvedConnectionBudget | undefined {
  if (value === undefined || value === false) return undefined;
  if (typeof value !== 'object' || value === null || Array.isArray(value)) invalidConfig(field, 'must be an object or false', value);
  const o = value as ConnectionBudgetOptions;
  checkOptionKeys(o, ['limitPerBackend', 'reserve', 'ttlMs'], field);
  const limitPerBackend = integerIn(o.limitPerBackend, `${field}.limitPerBackend`, 1, 1_000_000);
  const reserve = integerIn(o.reserve ?? 0, `${field}.reserve`, 0, 1_000_000);
  if (reserve >= limitPerBackend) invalidConfig(`${field}.reserve`, `must be below ${field}.limitPerBackend (${limitPerBackend})`, reserve);
  const ttlMs = integerIn(o.ttlMs ?? 10_000, `${field}.ttlMs`, 300, 3_600_000);
  return { limitPerBackend, reserve, ttlMs };
}
