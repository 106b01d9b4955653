/**
 * What /proc says about processes and the machine, for the proxy benches:
 * RSS, CPU ticks of a process, its threads or its process tree, the bench's
 * own (children included) and the machine's busy share. Linux only.
 */
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';

/** Resident memory of `pid` (VmRSS), bytes. */
export function rssBytes(pid: number): number {
  const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (m === null) throw new Error(`no VmRSS for ${pid}`);
  return Number(m[1]) * 1024;
}

/** CPU ticks of every thread of `pid`, user and system apart, by thread id. */
export function threadTimes(pid: number): Map<number, { user: number; sys: number }> {
  const out = new Map<number, { user: number; sys: number }>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    const stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    out.set(Number(tid), { user: Number(f[11]), sys: Number(f[12]) }); // fields 14 and 15 (utime, stime), counted from after the name
  }
  return out;
}

/** CPU ticks (user + system) of every thread of `pid`, by thread id. */
export function threadTicks(pid: number): Map<number, number> {
  return new Map([...threadTimes(pid)].map(([tid, t]) => [tid, t.user + t.sys]));
}

/** CPU ticks (user + system) of the whole process `pid`, all threads. */
export function processTicks(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(f[11]) + Number(f[12]);
}
export const CLK_TCK = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/** CPU ticks of `pid` and every descendant process (nginx's worker is its master's child). */
export function treeTicks(pid: number): number {
  let n = 0;
  try {
    n = processTicks(pid);
    for (const tid of readdirSync(`/proc/${pid}/task`)) {
      const kids = readFileSync(`/proc/${pid}/task/${tid}/children`, 'utf8').trim();
      for (const k of kids === '' ? [] : kids.split(' ')) n += treeTicks(Number(k));
    }
  } catch {
    // Gone meanwhile (or no children file): what was read counts.
  }
  return n;
}

/** This bench's own ticks: itself and its reaped children (wrk, the Node load client), utime + stime + cutime + cstime. */
export function selfTicks(): number {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
}

/** The machine's busy and total ticks, all cores (/proc/stat: busy = everything but idle and iowait). */
export function machineTicks(): { busy: number; total: number } {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
  return { busy: total - f[3]! - f[4]!, total };
}
