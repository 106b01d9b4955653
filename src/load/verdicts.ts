/**
 * First verdicts: which of a backend's configured health sources (the
 * active check — a roles check included —, the agent beside it, ORCA load
 * polls) have not yet delivered their first result. One owner-written word
 * per slot (layout.ts, word 38), one bit per source.
 *
 * Why a word in the table rather than a message: `router.acquireAsync({
 * intent })` in any thread waits for a first role verdict when its acquire
 * would fail, and the Balancer's `ready()` waits for all of them; both read
 * this word and wake on the change epoch, whose bump follows every settle.
 * A pending bit changes no eligibility: a backend is up until a check says
 * otherwise (HAProxy's start state), and a pick never reads this word.
 */
import { S_VERDICTS, type Layout } from './layout.js';

/** The sources of a first verdict (bits of the word). */
export const VerdictSource = {
  /** The active check (`health.check`; with `roles: true` its first result also carries the role). */
  Check: 1,
  /** The agent beside the check (`health.agent`). */
  Agent: 2,
  /** ORCA load polls (`health.orca` with `source: 'endpoint'`). */
  Orca: 4,
} as const;

/** The names of the bits, for messages: bit k of the word is `VERDICT_NAMES[k]`. */
export const VERDICT_NAMES = ['active check', 'agent', 'orca load report'] as const;

/** The first-verdict words of one table. */
export class FirstVerdicts {
  private readonly i32: Int32Array;
  private readonly layout: Layout;

  constructor(i32: Int32Array, layout: Layout) {
    this.i32 = i32;
    this.layout = layout;
  }

  /** Owner: a new occupant of `slot` awaits exactly the sources `bits`. */
  reset(slot: number, bits: number): void {
    // A store before the membership epoch's bump: a router that sees the new occupant sees what it awaits.
    Atomics.store(this.i32, this.layout.slot(slot) + S_VERDICTS, bits);
  }

  /** Owner: `slot` awaits the first verdict of `bit` too (a source that starts watching it). */
  expect(slot: number, bit: number): void {
    Atomics.or(this.i32, this.layout.slot(slot) + S_VERDICTS, bit);
  }

  /**
   * Owner: the source `bit` delivered (or stopped watching `slot`); returns
   * whether it was pending, and then the caller bumps the health epoch, so
   * that waiters (routers' `acquireAsync`, `ready()`) look again.
   */
  settle(slot: number, bit: number): boolean {
    // and: one SC read-modify-write says whether this call cleared it.
    return (Atomics.and(this.i32, this.layout.slot(slot) + S_VERDICTS, ~bit) & bit) !== 0;
  }

  /** The sources `slot` still awaits (0: none). Read off the pick path (a refused acquire, `ready()`). */
  pending(slot: number): number {
    return Atomics.load(this.i32, this.layout.slot(slot) + S_VERDICTS);
  }
}

/** The names of the sources in `bits`, joined: `active check, agent`. */
export function verdictNames(bits: number): string {
  const out: string[] = [];
  for (let k = 0; k < VERDICT_NAMES.length; k++) if ((bits & (1 << k)) !== 0) out.push(VERDICT_NAMES[k]!);
  return out.join(', ');
}
