/**
 * CandidateView: one router's picture of the LoadTable, built off the
 * request path.
 *
 * It holds a SlotCandidate for every slot of the membership in force (read
 * from the spec blob) and, after each {@link CandidateView.build}, the list
 * of members a lease may be taken on, with their eligibility fixed for that
 * build. The Router rebuilds it only when the table's change epoch moves or
 * a known ejection expires; between builds the list is the same array, so
 * prepared policies keep their tables. A slot enters the list only with the
 * spec of its current generation. Every member that is not draining is in
 * the list, eligible or not: the priority layer around every policy counts
 * unavailable and ejected members in their priority's availability (and
 * use-all panic may choose them), and hands the policy only the eligible
 * members of the group it chose.
 */
import { parseAddress } from '../core/spec.js';
import { ReportFlag } from '../load/backend-load.js';
import { HealthFlag, SlotState, type LoadTable } from '../load/load-table.js';
import { tagGeneration, tagState } from '../load/slot-tags.js';
import type { Logger } from '../log.js';
import { blobLines, lineHead, specFromJson, type LineHead } from './spec-blob.js';
import { slotCandidate, type LoadEnv, type SlotCandidate } from './slot-candidate.js';
import { applyEffectiveWeights, reportedFactor } from './effective-weight.js';
import { apertureSlice } from '../policy/aperture.js';

/** The candidate view of one router (its thread only). */
export class CandidateView {
  /** Every candidate of the membership in force, whatever its state. */
  all: SlotCandidate[] = [];
  /** The same candidates by backend id (one map for the view's life: exclusions.ts keeps a reference to it). */
  readonly byId = new Map<string, SlotCandidate>();
  /** Membership version of the blob the candidates were built from (0 before any). */
  version = 0;
  /** The members a lease may be taken on, as of the last build: a new array per build. */
  members: SlotCandidate[] = [];
  /** Milliseconds until the soonest ejection of a ready member ends, as of the last build; 0 when none. */
  soonestExpiryMs = 0;
  /** Milliseconds until a slow-start ramp should be looked at again, as of the last build; 0 when nobody ramps. */
  rampStepMs = 0;
  private readonly table: LoadTable;
  private readonly env: LoadEnv;
  private readonly keyed: boolean;
  private readonly log: Logger;
  private memberEpoch = -1;
  /** By slot: the blob line each candidate was built from (an own copy), and the candidate (reused while its line is unchanged). */
  private readonly lineOf: (string | undefined)[];
  private readonly candOf: (SlotCandidate | undefined)[];
  /** By slot: the readMembership call that last saw it in the blob. */
  private readonly seen: Int32Array;
  private stamp = 0;
  private readonly head: LineHead = { slot: 0, generation: 0, jsonStart: 0 };

  /** `keyed`: a hashing policy, whose weights slow start leaves alone (effective-weight.ts). */
  constructor(table: LoadTable, env: LoadEnv, log: Logger, keyed = false) {
    this.table = table;
    this.env = env;
    this.keyed = keyed;
    this.log = log;
    this.lineOf = new Array<string | undefined>(table.capacity).fill(undefined);
    this.candOf = new Array<SlotCandidate | undefined>(table.capacity).fill(undefined);
    this.seen = new Int32Array(table.capacity);
  }

  /**
   * Rebuilds the member list at shared-clock instant `now`: re-reads the
   * spec blob first when the membership epoch moved (flushing the batched
   * pick counts of the candidates it replaces), then every candidate's tag
   * and ejection.
   */
  build(now: number): void {
    const t = this.table;
    const memberEpoch = t.membershipEpoch();
    if (memberEpoch !== this.memberEpoch) {
      this.flushPicks();
      this.readMembership();
      this.memberEpoch = memberEpoch;
    }
    const members: SlotCandidate[] = [];
    let ready = 0;
    let eligible = 0;
    let soonest = 0;
    /** Degraded candidates, and the priorities that still have a healthy one. */
    let degraded: SlotCandidate[] | undefined;
    let healthyTiers: Set<number> | undefined;
    for (const c of this.all) {
      const tag = t.tag(c.slot);
      // A slot whose generation is not the blob's belongs to a newer
      // membership still being published: leave it out until the epoch moves.
      if (tagGeneration(tag) !== c.generation) continue;
      const state = tagState(tag);
      if (state === SlotState.Ready) c.status = 'ready';
      else if (state === SlotState.Unavailable) c.status = 'unavailable';
      else if (state === SlotState.Draining) c.status = 'draining';
      else continue;
      const left = state === SlotState.Ready ? t.ejectedForMs(c.slot, now) : 0;
      if (left > 0 && (soonest === 0 || left < soonest)) soonest = left;
      // The owner's health word: an active check's verdict (and an agent's
      // `down` beside it) and the membership's degraded mark. Unhealthy is like ejected; degraded is
      // eligible only where its tier has no healthy host left (below).
      const health = state === SlotState.Ready ? t.health.health(c.slot) : 0;
      const reported = state === SlotState.Ready ? t.reported.flags(c.slot) : 0;
      // A backend that reported drain or maint (agent check) takes no new lease, even failing open.
      const held = (reported & (ReportFlag.Drain | ReportFlag.Maint)) !== 0;
      // A reported weight of 0 (an agent's `0%`, an ORCA weight that rounds to 0: effective-weight.ts's rule) is HAProxy's weight 0: no new
      // lease while anything else is eligible, but, unlike drain, panic may still use it (it is not held).
      const zeroWeight = state === SlotState.Ready && reportedFactor(t, c.slot) === 0;
      c.held = held;
      c.eligible =
        state === SlotState.Ready && left === 0 && (health & (HealthFlag.Unhealthy | HealthFlag.AgentDown)) === 0 && !held && !zeroWeight;
      c.blocked = false;
      if (state === SlotState.Ready && !held) ready++;
      if (c.eligible) {
        eligible++;
        if ((health & (HealthFlag.CheckDegraded | HealthFlag.MemberDegraded)) !== 0) {
          degraded ??= [];
          degraded.push(c);
        } else {
          healthyTiers ??= new Set();
          healthyTiers.add(c.priority);
        }
      }
      if (c.status !== 'draining') members.push(c);
    }
    if (degraded !== undefined) {
      // Envoy's degraded hosts: used only when no healthy host of their priority is left.
      for (const c of degraded) if (healthyTiers?.has(c.priority) === true) c.eligible = false;
    }
    if (eligible === 0 && ready > 0) {
      // Every ready backend is ejected or unhealthy: the layer's use-all panic
      // (availability 0 % is below any panic threshold) routes over the
      // panic-eligible ones until one recovers, rather than refusing all
      // traffic (Sōzu and Envoy fail open the same way).
      this.log.warn({ backends: ready }, 'poise: every ready backend is ejected; failing open (priority panic)');
    }
    const inSlice = applyAperture(t, members);
    this.rampStepMs = applyEffectiveWeights(t, inSlice, now, !this.keyed);
    this.members = inSlice;
    this.soonestExpiryMs = soonest;
  }

  /**
   * Adds the candidates' batched statistics — picks, released successes and
   * failures — to the table's counters, only to their own generation (a slot
   * reused since belongs to another backend).
   */
  flushPicks(): void {
    for (const c of this.all) flushStats(this.table, c);
  }

  /**
   * Builds the candidates from the spec blob, reusing each one whose (slot,
   * generation, spec) line is unchanged. Nothing of the blob's text outlives
   * the call: a changed line is kept as a copy of its own (a line from
   * `split` is a slice that would keep the whole ~60 KB text alive, and in
   * every worker, one per change, that is what drives the old generation to
   * a full collection), and the per-slot arrays and the id map are updated
   * in place.
   */
  private readMembership(): void {
    const lines = blobLines(this.table.specs.read());
    const all: SlotCandidate[] = [];
    const byId = this.byId;
    const head = this.head;
    const lineOf = this.lineOf;
    const candOf = this.candOf;
    const seen = this.seen;
    const stamp = ++this.stamp;
    const changed: SlotCandidate[] = [];
    for (let k = 1; k < lines.length; k++) {
      const line = lines[k]!;
      lineHead(line, head);
      const slot = head.slot;
      seen[slot] = stamp;
      // Same (slot, generation, spec) text as last time: the same candidate
      // (its picks were just flushed; build() resets its flags).
      let c = lineOf[slot] === line ? candOf[slot] : undefined;
      if (c === undefined) {
        const spec = specFromJson(line.slice(head.jsonStart));
        const a = parseAddress(spec.address);
        c = slotCandidate(this.env, slot, head.generation, spec, a?.host ?? '', a?.port ?? 0);
        const old = candOf[slot];
        if (old !== undefined) {
          // Its batched statistics were flushed before this read (build()); leases still open on it count directly.
          old.retired = true;
          if (byId.get(old.id) === old) byId.delete(old.id);
        }
        lineOf[slot] = ownCopy(line);
        candOf[slot] = c;
        changed.push(c);
      }
      all.push(c);
    }
    // Slots the blob no longer lists: forget them (and their ids, unless a changed candidate took the id over).
    for (const c of this.all) {
      if (seen[c.slot] === stamp) continue;
      c.retired = true;
      lineOf[c.slot] = undefined;
      candOf[c.slot] = undefined;
      if (byId.get(c.id) === c) byId.delete(c.id);
    }
    for (const c of changed) byId.set(c.id, c);
    this.all = all;
    this.version = lines.length === 0 ? 0 : Number(lines[0]);
  }
}

/**
 * The aperture (load/aperture-region.ts, policy/aperture.ts): when the table
 * holds a width and this process's coordinate, only the members of the
 * process's slice of the ring, each with its overlap as `apertureWeight`
 * (effective-weight.ts multiplies it in); the others are left out of the
 * list altogether, so the priority layer does not count them as unavailable
 * (a slice is a choice, not an outage). The ring is the non-draining members
 * sorted by id, the same order in every process that sees the same
 * membership. Without an aperture, `members` as it is (every weight 1).
 * Runs at view builds only, never on a pick.
 */
function applyAperture(table: LoadTable, members: SlotCandidate[]): SlotCandidate[] {
  for (const c of members) c.apertureWeight = 1;
  const a = table.aperture.read();
  if (a === undefined || members.length === 0 || a.processes === 1) return members;
  const ring = members.slice().sort(byId);
  const slice = apertureSlice(a.rank, a.processes, ring.length, a.width);
  // Divided by their greatest common divisor: a slice of whole backends (or the whole ring) weighs each 1, as without an aperture.
  let g = 0;
  for (const m of slice) g = gcd(g, m.weight);
  const chosen = new Set<SlotCandidate>();
  for (const m of slice) {
    const c = ring[m.index]!;
    c.apertureWeight = m.weight / g;
    chosen.add(c);
  }
  // In the members' own order (priority and locality plans keep theirs).
  return members.filter((c) => chosen.has(c));
}

function byId(a: SlotCandidate, b: SlotCandidate): number {
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

function gcd(a: number, b: number): number {
  let x = a;
  let y = b;
  while (y !== 0) {
    const r = x % y;
    x = y;
    y = r;
  }
  return x;
}

/**
 * A copy of `s` that shares no memory with the string it was cut from:
 * concatenating makes a new string, which `slice` flattens before cutting
 * (a plain `slice` would point into the original).
 */
function ownCopy(s: string): string {
  return ` ${s}`.slice(1);
}

/** Adds `c`'s batched picks and outcomes to the table (only to its own generation) and zeroes them. */
export function flushStats(table: LoadTable, c: SlotCandidate): void {
  if ((c.unflushedPicks | c.unflushedOk | c.unflushedFail) === 0) return;
  if (tagGeneration(table.tag(c.slot)) === c.generation) {
    if (c.unflushedPicks > 0) table.leases.countPicks(c.slot, c.unflushedPicks);
    table.health.countOutcomes(c.slot, c.unflushedOk, c.unflushedFail);
  }
  c.unflushedPicks = 0;
  c.unflushedOk = 0;
  c.unflushedFail = 0;
}
