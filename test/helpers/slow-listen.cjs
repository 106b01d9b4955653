/**
 * Preloaded into a `poise proxy` child (`NODE_OPTIONS=--require <this file>`;
 * a preload runs in every thread, worker threads included): delays
 * `net.Server#listen` on the ports named in `POISE_TEST_SLOW_LISTEN`
 * ("PORT,PORT:MS") by MS milliseconds, so a test can hold a listener down
 * for a known time instead of hoping a thread starts slowly.
 */
'use strict';
const net = require('node:net');

const spec = process.env.POISE_TEST_SLOW_LISTEN;
if (spec !== undefined && spec !== '') {
  const [ports = '', ms = '0'] = spec.split(':');
  const slow = new Set(ports.split(',').map(Number));
  const delayMs = Number(ms);
  const listen = net.Server.prototype.listen;
  net.Server.prototype.listen = function (...args) {
    const first = args[0];
    const port = typeof first === 'object' && first !== null ? first.port : first;
    if (!slow.has(Number(port))) return listen.apply(this, args);
    setTimeout(() => listen.apply(this, args), delayMs);
    return this;
  };
}
