import { describe, expect, it } from 'vitest';
import { runBalls } from '../src/balls.js';
import { renderReport } from '../src/report-html.js';
import {
  COLUMNS,
  formatRecommendation,
  formatTable,
  recommend,
  RECOMMEND_RULE,
  shownColumns,
  type BenchResult,
  type PolicyResult,
} from '../src/results.js';
import { checkWellFormed } from './helpers/wellformed.js';

function policy(name: string, over: Partial<PolicyResult> = {}): PolicyResult {
  return {
    policy: name,
    interrupted: false,
    seconds: 1,
    requests: 1000,
    errors: 3,
    throughput: 1000,
    latencyMs: { p50: 4, p99: 9, p999: 40, mean: 5, max: 50 },
    slowShare: 0.05,
    inflight: { max: 6, mean: 2, maxOverMean: 3 },
    perBackend: [
      { id: 'b0', role: 'slow', requests: 50, errors: 0, share: 0.05 },
      { id: 'b1', role: 'failing', requests: 950, errors: 3, share: 0.95 },
    ],
    cdf: [
      [1, 0.1],
      [4, 0.5],
      [40, 1],
    ],
    trackedInflight: [
      [0, 1],
      [0.05, 3],
    ],
    events: [{ at: 0.5, label: 'x <joins> & "y"' }],
    backupShare: null,
    checksMarkedDown: null,
    ...over,
  };
}

function result(policies: PolicyResult[]): BenchResult {
  return {
    tool: 'poise bench',
    version: '0.1.0',
    machine: { node: 'v20', platform: 'linux x64', cpus: 2, cpuModel: 'cpu' },
    startedAt: 'now',
    config: {
      scenario: 'slow-backend',
      description: 'desc <b>',
      workers: 2,
      backends: 2,
      concurrency: 4,
      durationS: 1,
      warmupS: 0.2,
      connection: 'persistent',
      seed: null,
      membership: 'embedded',
      tracked: 'b0',
    },
    policies,
    balls: runBalls({ ns: [1000], seed: 1, staleBins: 100, bs: [1, 16], staleTrials: 1 }),
    interrupted: false,
  };
}

describe('the table', () => {
  it('has one row per policy and marks the best of each column (higher req/s, lower everything else)', () => {
    const text = formatTable([
      policy('a', { throughput: 900, errors: 1 }),
      policy('b', { latencyMs: { p50: 2, p99: 9, p999: 40, mean: 3, max: 50 }, slowShare: null }),
    ]);
    const [header, , rowA, rowB] = text.split('\n');
    // Every column but the backup share, which no row has (below).
    for (const c of COLUMNS) if (c.key !== 'backupAfter') expect(header).toContain(c.header);
    expect(rowA).toMatch(/^a\s+900\s+4\.00\s+9\.00\*/);
    expect(rowA).toMatch(/ 1 \(0\.10%\)\*$/);
    expect(rowB).toMatch(/^b\s+1000\*\s+2\.00\*/);
    expect(rowB).toContain('–');
  });
});

describe('columns with no value in any row', () => {
  const header = (results: PolicyResult[]): string => formatTable(results).split('\n')[0]!;

  it('are left out of the table and the report (the backup share outside failover); a column with one value stays', () => {
    const none = [policy('a'), policy('b')];
    expect(header(none)).not.toContain('backup share');
    expect(shownColumns(none).map((c) => c.key)).toEqual(COLUMNS.map((c) => c.key).filter((k) => k !== 'backupAfter'));
    expect(formatTable(none)).not.toContain('–');
    expect(renderReport(result(none))).not.toContain('backup share');
    const one = [policy('a'), policy('b', { backupShare: { before: 0, after: 0.5 } })];
    expect(header(one)).toContain('backup share before→after');
    expect(formatTable(one).split('\n')[2]).toContain('–');
    // A column empty only in some rows stays (slow share: one scenario row without the role).
    expect(header([policy('a', { slowShare: null }), policy('b')])).toContain('slow share');
    expect(header([policy('a', { slowShare: null }), policy('b', { slowShare: null })])).not.toContain('slow share');
  });
});

describe('the recommendation (RECOMMEND_RULE)', () => {
  const p99 = (v: number) => ({ p50: 4, p99: v, p999: v * 2, mean: 5, max: v * 3 });

  it('is the lowest p99 among the policies within 10 % of the best throughput and 0.5 points of the fewest errors', () => {
    const rec = recommend([
      policy('round-robin', { throughput: 3600, latencyMs: p99(65), slowShare: 0.125 }),
      policy('least-loaded', { throughput: 7000, latencyMs: p99(31.8), slowShare: 0.014 }),
      policy('p2c:latency', { throughput: 7600, latencyMs: p99(9.69), slowShare: 0.003 }),
    ])!;
    expect(rec.policy).toBe('p2c:latency');
    expect(rec.tiedWith).toBeNull();
    expect(rec.why).toBe(
      'the lowest p99 (9.69 ms) of the 2 policies within 10% of the best throughput (7600 req/s) and 0.5 points of the lowest error rate (0.30%); it sent the slow backend 0.3% of its requests; not candidates (throughput or errors): round-robin',
    );
  });

  it('a better tail with too little throughput or too many errors is not a candidate', () => {
    const rules = [
      // p99 best, but 11 % under the best throughput.
      [policy('fast-tail', { throughput: 890, latencyMs: p99(5) }), policy('steady', { throughput: 1000, latencyMs: p99(20) })],
      // p99 best, but 0.6 points more errors than the best (3 → 9 of 1000).
      [policy('fast-tail', { errors: 9, latencyMs: p99(5) }), policy('steady', { errors: 3, latencyMs: p99(20) })],
    ];
    for (const results of rules) expect(recommend(results)!.policy).toBe('steady');
    // At the bounds themselves it is a candidate: 10 % under, 0.5 points more.
    expect(recommend([policy('fast-tail', { throughput: 900, latencyMs: p99(5) }), policy('steady', { latencyMs: p99(20) })])!.policy).toBe(
      'fast-tail',
    );
    expect(recommend([policy('fast-tail', { errors: 8, latencyMs: p99(5) }), policy('steady', { latencyMs: p99(20) })])!.policy).toBe(
      'fast-tail',
    );
  });

  it('names a runner-up within 10 % of the p99 as a tie, and only then', () => {
    const tie = recommend([policy('a', { latencyMs: p99(10) }), policy('b', { latencyMs: p99(11) }), policy('c', { latencyMs: p99(30) })])!;
    expect([tie.policy, tie.tiedWith]).toEqual(['a', 'b']);
    expect(tie.why).toMatch(/\. b's p99 \(11\.0 ms\) is within 10%: a tie on this run$/);
    expect(recommend([policy('a', { latencyMs: p99(10) }), policy('b', { latencyMs: p99(11.2) })])!.tiedWith).toBeNull();
    expect(formatRecommendation(tie)).toMatch(/^Recommendation: a \(or b\) — the lowest p99/);
  });

  it('a run cut short competes only when every run was cut; nothing measured recommends nothing', () => {
    expect(recommend([policy('cut', { interrupted: true, latencyMs: p99(1) }), policy('whole', { latencyMs: p99(20) })])!.policy).toBe(
      'whole',
    );
    expect(recommend([policy('cut', { interrupted: true, latencyMs: p99(1) })])!.policy).toBe('cut');
    expect(recommend([])).toBeNull();
    expect(formatRecommendation(null)).toBe('Recommendation: none (nothing measured).');
  });

  it('when no policy has both the throughput and the errors, the tail decides among all', () => {
    const rec = recommend([
      policy('quick', { throughput: 1000, errors: 50, latencyMs: p99(30) }),
      policy('clean', { throughput: 500, errors: 0, latencyMs: p99(20) }),
    ])!;
    expect(rec.policy).toBe('clean');
    expect(rec.why).toMatch(/^the lowest p99 \(20\.0 ms\): no policy had both the best throughput and the fewest errors/);
    expect(RECOMMEND_RULE).toEqual({ THROUGHPUT_WITHIN: 0.1, ERRORS_WITHIN: 0.005, TIE_WITHIN: 0.1 });
  });

  it('one candidate is "the only policy"; a least-loaded winner carries the stale-loads caveat from the run’s own table', () => {
    const results = [
      policy('least-loaded', { throughput: 6940, latencyMs: p99(31.2), slowShare: 0.014 }),
      policy('p2c:connections', { throughput: 5634, latencyMs: p99(47.2) }),
      policy('p2c:latency', { throughput: 5511, latencyMs: p99(31) }),
    ];
    const balls = runBalls({ ns: [1000], seed: 1, staleBins: 100, bs: [1, 64], staleTrials: 1 });
    const last = balls.stale.rows.at(-1)!;
    const rec = recommend(results, balls)!;
    expect(rec.why).toMatch(
      /^the only policy within 10% of the best throughput \(6940 req\/s\) and 0\.5 points of the lowest error rate \(0\.30%\), p99 31\.2 ms;/,
    );
    expect(rec.caveat).toBe(
      `least-loaded wins here because every worker reads the same current counters in one process; with loads refreshed every 64 picks it herds (max load ${last.leastLoaded.toFixed(1)} against ${last.twoChoice.toFixed(1)} for two choices, stale-loads table): across processes, which share no counters, use p2c:latency (p99 31.0 ms here)`,
    );
    expect(formatRecommendation(rec).split('\n')[1]).toBe(`But ${rec.caveat}.`);
    // Without the table, or with another winner: no caveat.
    expect(recommend(results)!.caveat).toBeNull();
    expect(
      recommend([policy('p2c:latency', { latencyMs: p99(5) }), policy('least-loaded', { latencyMs: p99(9) })], balls)!.caveat,
    ).toBeNull();
  });

  it('the HTML report carries it', () => {
    expect(renderReport(result([policy('a', { latencyMs: p99(30) }), policy('b', { latencyMs: p99(5) })]))).toContain(
      '<strong>Recommendation: b</strong>',
    );
  });
});

describe('the HTML report', () => {
  const html = renderReport(result([policy('round-robin'), policy('p2c:latency', { throughput: 2000 })]));

  it('is well-formed, with an <svg> per chart (share, CDF, in-flight, two balls charts)', () => {
    const tags = checkWellFormed(html);
    expect(tags.filter((t) => t === 'svg')).toHaveLength(5);
    expect(tags.filter((t) => t === 'table')).toHaveLength(2);
  });

  it('the well-formedness check itself rejects a misnested or unclosed document', () => {
    expect(() => checkWellFormed('<html><body><svg></body></svg></html>')).toThrow('</body> closes <svg>');
    expect(() => checkWellFormed('<html><body><p>x</body></html>')).toThrow();
    expect(() => checkWellFormed('<html><body><svg><path d="M0,0"/></svg></body></html>')).not.toThrow();
  });

  it('is self-contained: no URL, no script, no external resource', () => {
    expect(html).not.toMatch(/https?:|\/\/[a-z]|<script|<link|src=|@import/i);
  });

  it('escapes text from the run', () => {
    expect(html).toContain('x &lt;joins&gt; &amp; &quot;y&quot;');
    expect(html).not.toContain('<joins>');
  });
});
