/**
 * The thread entry of a proxy worker (proxy-workers.ts starts it): loads
 * proxy-worker.ts, the worker itself, one module file at a time
 * (core/ordered-import.ts), so a worker starting under a low descriptor
 * limit holds one module file open, not every file of its graph at once.
 * @internal
 */
import { importInOrder } from '../core/ordered-import.js';

await importInOrder(new URL('./worker.js', import.meta.url));
