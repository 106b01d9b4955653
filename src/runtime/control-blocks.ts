/**
 * The Balancer's control blocks — `health`, `retryBudget`, `slowStart`,
 * `connectionBudget` — and the one rule of precedence between a Balancer
 * option and a membership document's block of the same name
 * ({@link blocksInForce}): the option sets what is in force at
 * construction; a snapshot that carries a block replaces that block (`false`
 * included: it turns the block off); a snapshot without it, or an array of
 * backends, keeps the block in force, whichever of the two set it. Each
 * block is validated by its own resolver, naming `options.<block>` or
 * `membership.<block>`.
 */
import type { MembershipSnapshot } from '../core/spec.js';
import { resolveHealthConfig } from '../health/config.js';
import type { ResolvedHealth } from '../health/supervisor.js';
import type { RetryBudgetConfig } from '../load/retry-region.js';
import type { SlowStartConfig } from '../load/slow-start.js';
import { resolveConnectionBudget, type ResolvedConnectionBudget } from './connection-budget-options.js';
import { resolveRetryBudget } from './retry-budget.js';
import { resolveSlowStart } from './slow-start-options.js';

/** Every control block, resolved: what is in force. */
export interface ControlBlocks {
  health: ResolvedHealth;
  retryBudget: RetryBudgetConfig | undefined;
  slowStart: SlowStartConfig | undefined;
  connectionBudget: ResolvedConnectionBudget | undefined;
}

/** The blocks' names, in the order they are validated. */
export const BLOCK_NAMES = ['health', 'retryBudget', 'slowStart', 'connectionBudget'] as const;
export type BlockName = (typeof BLOCK_NAMES)[number];

/** Where a block's value comes from: a Balancer option or a membership document (a snapshot). */
export type BlockSource = 'options' | 'membership';

/** Each block's resolver: `value` is never undefined here for a snapshot (an absent block is not resolved). */
const RESOLVE: { [K in BlockName]: (value: unknown, field: string, from: BlockSource) => ControlBlocks[K] } = {
  // An absent health option runs nothing; a document's health block is JSON (a custom check needs code: options only).
  health: (v, field, from) => (v === undefined ? {} : resolveHealthConfig(v, field, from === 'membership')),
  retryBudget: (v, field) => (v === undefined || v === false ? undefined : resolveRetryBudget(v, field)),
  slowStart: (v, field) => resolveSlowStart(v, field),
  connectionBudget: (v, field) => resolveConnectionBudget(v, field),
};

/** What `blocksInForce` decided: the blocks in force afterwards, and which of them the input set. */
export interface BlocksOutcome {
  blocks: ControlBlocks;
  /** The blocks the input carried (every block for options). */
  carried: ReadonlySet<BlockName>;
}

/**
 * The one precedence rule of every control block. `from: 'options'`
 * (construction, `inForce` ignored): each block is the option's, or off
 * when the option is absent. `from: 'membership'`: a block the snapshot
 * carries (its field is not undefined) replaces the one in force; the
 * others stay; an array of backends carries none. Throws `InvalidConfig`
 * naming `<from>.<block>` before deciding anything, so a refused input
 * changes nothing.
 */
export function blocksInForce(
  inForce: ControlBlocks | undefined,
  from: BlockSource,
  input: Readonly<Partial<Record<BlockName, unknown>>> | MembershipSnapshot | readonly unknown[],
): BlocksOutcome {
  const carried = new Set<BlockName>();
  const blocks = { ...(inForce ?? { health: {}, retryBudget: undefined, slowStart: undefined, connectionBudget: undefined }) };
  // An array of backends carries no block.
  if (Array.isArray(input)) return { blocks, carried };
  const fields = input as Readonly<Partial<Record<BlockName, unknown>>>;
  for (const name of BLOCK_NAMES) {
    const value = fields[name];
    if (from === 'membership' && value === undefined) continue;
    set(blocks, name, RESOLVE[name](value, `${from}.${name}`, from), carried);
  }
  return { blocks, carried };
}

function set<K extends BlockName>(blocks: ControlBlocks, name: K, value: ControlBlocks[K], carried: Set<BlockName>): void {
  blocks[name] = value;
  carried.add(name);
}
