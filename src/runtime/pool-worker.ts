/**
 * The piscina entry of a poise worker pool: attaches this worker's Router at
 * start-up (before piscina reports the worker ready), then loads the user's
 * task module and hands piscina its default export.
 */
import { poolTaskUrl, workerRouter } from './pool.js';

workerRouter();
const mod = (await import(poolTaskUrl())) as { default?: unknown };
const task = typeof mod.default === 'function' ? mod.default : mod;

export default task;
