/**
 * The piscina entry of a poise worker pool: attaches this worker's Router at
 * start-up (before piscina reports the worker ready), then loads the user's
 * task module and hands piscina its default export. A start-up that throws
 * does not fail the worker (see pool-start-failure.ts): every task rejects
 * with the reason instead.
 */
import { poolTaskUrl, workerRouter } from './pool.js';
import { startFailure, type StartFailure } from './pool-start-failure.js';

const url = poolTaskUrl();
let failure: StartFailure | undefined;
let task: unknown;
try {
  workerRouter();
} catch (err) {
  failure = startFailure('router', url, err);
}
if (failure === undefined) {
  try {
    const mod = (await import(url)) as { default?: unknown };
    task = typeof mod.default === 'function' ? mod.default : mod;
  } catch (err) {
    failure = startFailure('task-module', url, err);
  }
}
if (failure !== undefined) {
  const reason = failure;
  task = (): never => {
    throw reason;
  };
}

export default task;
