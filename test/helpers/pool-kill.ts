/**
 * The "a server dies mid-run" scenario shared by the pg and mysql2 pool
 * tests: 20 lanes × 50 checkouts, the server killed after the 300th, and
 * the laws that must hold afterwards.
 */
import { expect } from 'vitest';
import type { RoutedSocket } from '../../src/outbound/routed-stream.js';

/** A socket the pool asked for, whether it was created after the kill, and the errors it emitted. */
export interface TrackedSocket {
  socket: RoutedSocket;
  afterKill: boolean;
  errors: number;
}

/** One pooled connection checked out: its backend, one query answering the server's port, and its return. */
export interface Checkout {
  backend: string;
  port(): Promise<number>;
  release(err?: Error): void;
}

/** What the run observed. */
export interface KillRun {
  sockets: TrackedSocket[];
  failedOn: string[];
  connectErrors: string[];
  answeredAfterKill: number[];
}

/** Wraps a routedStream factory so every socket the pool opens is recorded. */
export function tracking(factory: () => RoutedSocket): { stream: () => RoutedSocket; sockets: TrackedSocket[]; killed: { v: boolean } } {
  const sockets: TrackedSocket[] = [];
  const killed = { v: false };
  const stream = (): RoutedSocket => {
    const socket = factory();
    const entry = { socket, afterKill: killed.v, errors: 0 };
    socket.on('error', () => entry.errors++);
    sockets.push(entry);
    return socket;
  };
  return { stream, sockets, killed };
}

/** Runs the lanes; `kill` resolves when the server has exited. */
export async function killMidway(
  track: ReturnType<typeof tracking>,
  checkout: () => Promise<Checkout>,
  kill: () => Promise<void>,
): Promise<KillRun> {
  const run: KillRun = { sockets: track.sockets, failedOn: [], connectErrors: [], answeredAfterKill: [] };
  let done = 0;
  await Promise.all(
    Array.from({ length: 20 }, async () => {
      for (let i = 0; i < 50; i++) {
        let c: Checkout;
        try {
          c = await checkout();
        } catch (err) {
          // A connection the dying server accepted, then refused or reset.
          run.connectErrors.push((err as Error).message);
          continue;
        }
        const afterKill = track.killed.v;
        try {
          const port = await c.port();
          if (afterKill) run.answeredAfterKill.push(port);
          c.release();
        } catch (err) {
          run.failedOn.push(c.backend);
          c.release(err as Error);
        }
        if (++done === 300) {
          await kill();
          track.killed.v = true;
        }
      }
    }),
  );
  expect(track.killed.v).toBe(true);
  return run;
}

/** Errors only on the dead server's connections; the pool's replacements and every later query on the live one. */
export function expectKillLaws(run: KillRun, dead: string, live: string, livePort: number): void {
  // Every socket that saw an error was routed to the dead server, and so was every failed query.
  expect(run.sockets.filter((s) => s.errors > 0).every((s) => s.socket.lease?.id === dead)).toBe(true);
  expect(run.failedOn.every((id) => id === dead)).toBe(true);
  for (const m of run.connectErrors) expect(m).toMatch(/shutting down|terminat|ECONNRESET|EPIPE|closed/i);
  // At most one failed checkout or query per connection the dead server held.
  const onDead = run.sockets.filter((s) => s.socket.lease?.id === dead).length;
  expect(run.failedOn.length + run.connectErrors.length).toBeLessThanOrEqual(onDead);
  // Every query issued after the kill was answered by the live server.
  expect(run.answeredAfterKill.length).toBeGreaterThan(0);
  expect(run.answeredAfterKill.every((port) => port === livePort)).toBe(true);
  // The pool replaced the dead connections on the live server (it held 10 before the kill),
  // and every connection opened after the server was gone landed there.
  expect(run.sockets.filter((s) => s.socket.lease?.id === live).length).toBeGreaterThan(10);
  expect(run.sockets.filter((s) => s.afterKill).every((s) => s.socket.lease?.id === live)).toBe(true);
}

/**
 * 1,000 queries in 20 lanes of 50 (the pool opens all its 20 connections at
 * once); `ask` answers (server port, server-side connection id) as the
 * server reports them. Asserts the split: every query counted, each server
 * some, and the 20 connections exactly 10/10 — two choices among two
 * backends compare both, so p2c:connections alternates exactly.
 */
export async function expectEvenSpread(ask: () => Promise<{ port: number; id: number }>, portA: number, portB: number): Promise<void> {
  const perPort = new Map<number, number>();
  const connections = new Set<string>();
  await Promise.all(
    Array.from({ length: 20 }, async () => {
      for (let i = 0; i < 50; i++) {
        const { port, id } = await ask();
        perPort.set(port, (perPort.get(port) ?? 0) + 1);
        connections.add(`${port}/${id}`);
      }
    }),
  );
  expect((perPort.get(portA) ?? 0) + (perPort.get(portB) ?? 0)).toBe(1000);
  expect(perPort.get(portA)).toBeGreaterThan(0);
  expect(perPort.get(portB)).toBeGreaterThan(0);
  const byServer = (port: number): number => [...connections].filter((c) => c.startsWith(`${port}/`)).length;
  expect(byServer(portA)).toBe(10);
  expect(byServer(portB)).toBe(10);
}
