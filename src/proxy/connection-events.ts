/**
 * The socket listeners of a proxied connection, shared by every connection
 * (the connection hangs off its sockets under {@link kConn}), so an idle
 * connection costs one object, not a dozen closures. Each forwards to the
 * connection's handler and contains what it throws.
 */
import type net from 'node:net';
import type { Connection } from './connection.js';
import { handOver, nextReadBuffer, sharedReadBuffer } from './read-buffers.js';

/** Marks a socket the proxy itself is closing (shutdown), so a connection that ends unspliced counts as `shutdown`. @internal */
export const kCut = Symbol('poise.cut');

/** The connection a socket belongs to. @internal */
export const kConn = Symbol('poise.connection');

/** A client or upstream socket with its connection. @internal */
export type Tagged = net.Socket & { [kConn]?: Connection; [kCut]?: boolean };

// Shared listeners: `this` is the socket; the connection hangs off it. Each
// catches what its handler throws and closes that connection alone (crash):
// an error escaping an event listener would take the whole thread down.
function conn(s: net.Socket): Connection {
  return (s as Tagged)[kConn]!;
}
export function onHeaderData(this: net.Socket, chunk: Buffer): void {
  const c = conn(this);
  try {
    c.headerData(chunk);
  } catch (err) {
    c.crash(err);
  }
}
export function onClientData(this: net.Socket, chunk: Buffer): void {
  const c = conn(this);
  try {
    c.clientData(chunk);
  } catch (err) {
    c.crash(err);
  }
}
/** How a dialled upstream socket reads (read-buffers.ts); the callback runs with the socket as `this`. */
export const UPSTREAM_READS: net.OnReadOpts = { buffer: nextReadBuffer, callback: onServerRead };
export function onServerRead(this: net.Socket, n: number, buf: Uint8Array): boolean {
  const c = conn(this);
  try {
    c.serverRead(n, buf as Buffer);
  } catch (err) {
    handOver(sharedReadBuffer());
    c.crash(err);
  }
  return true;
}
export function onClientDrain(this: net.Socket): void {
  const c = conn(this);
  try {
    c.clientDrain();
  } catch (err) {
    c.crash(err);
  }
}
export function onServerDrain(this: net.Socket): void {
  const c = conn(this);
  try {
    c.serverDrain();
  } catch (err) {
    c.crash(err);
  }
}
export function onClientEnd(this: net.Socket): void {
  const c = conn(this);
  try {
    c.clientEnd();
  } catch (err) {
    c.crash(err);
  }
}
export function onServerEnd(this: net.Socket): void {
  const c = conn(this);
  try {
    c.serverEnd();
  } catch (err) {
    c.crash(err);
  }
}
export function onClientError(this: net.Socket, e: NodeJS.ErrnoException): void {
  const c = conn(this);
  try {
    c.clientError(e);
  } catch (err) {
    c.crash(err);
  }
}
export function onServerError(this: net.Socket, e: NodeJS.ErrnoException): void {
  const c = conn(this);
  try {
    c.serverError(e);
  } catch (err) {
    c.crash(err);
  }
}
export function onClientClose(this: net.Socket): void {
  const c = conn(this);
  try {
    c.clientClose();
  } catch (err) {
    c.crash(err);
  }
}
export function onServerClose(this: net.Socket): void {
  const c = conn(this);
  try {
    c.serverClose();
  } catch (err) {
    c.crash(err);
  }
}
