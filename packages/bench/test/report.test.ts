import { describe, expect, it } from 'vitest';
import { runBalls } from '../src/balls.js';
import { renderReport } from '../src/report-html.js';
import { COLUMNS, formatTable, type BenchResult, type PolicyResult } from '../src/results.js';
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
    for (const c of COLUMNS) expect(header).toContain(c.header);
    expect(rowA).toMatch(/^a\s+900\s+4\.00\s+9\.00\*/);
    expect(rowA).toMatch(/ 1 \(0\.10%\)\*$/);
    expect(rowB).toMatch(/^b\s+1000\*\s+2\.00\*/);
    expect(rowB).toContain('–');
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
