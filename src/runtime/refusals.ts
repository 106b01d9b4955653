/**
 * Why an acquire found no lease, as the `PoiseError` it throws: the one
 * wording of each refusal (`Empty`, `NoEligibleCandidates`, `Overloaded`
 * at the fleet connection budget's share, `ReplicaLag`).
 */
import { PoiseError } from '../core/errors.js';

/** A membership with no backends. */
function refuseEmpty(): never {
  throw new PoiseError('Empty', 'acquire: the membership has no backends');
}

/** Every candidate tried refused a connection lease at this process's budget share. */
export function refuseAtShare(candidates: number): never {
  throw new PoiseError(
    'Overloaded',
    `acquire: none of the ${candidates} candidates may take a connection lease: this process holds its whole connection budget share on those it tried`,
  );
}

/** None of `candidates` may take a lease (`members`: the whole view's size; `atShare`: a budget share refused one). */
export function refuseNone(members: number, candidates: number, atShare: boolean): never {
  if (members === 0) refuseEmpty();
  if (atShare) refuseAtShare(candidates);
  throw new PoiseError(
    'NoEligibleCandidates',
    `acquire: none of the ${candidates} candidates may take a lease (draining, unavailable, excluded, ejected or at maxInflight)`,
  );
}

/** No member of the role an `intent` asks for qualifies (`members`: the whole view's size). */
export function refuseNoRole(members: number, intent: 'read' | 'write', why: string): never {
  if (members === 0) refuseEmpty();
  if (intent === 'write') throw new PoiseError('NoEligibleCandidates', `acquire({ intent: 'write' }): ${why}`);
  throw new PoiseError('ReplicaLag', `acquire({ intent: 'read' }): ${why}`);
}
