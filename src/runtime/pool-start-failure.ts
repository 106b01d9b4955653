/**
 * What a pool worker that could not start hands back instead of dying.
 *
 * A worker whose start-up throws (its task module is missing or does not
 * evaluate, its Router cannot attach) would make piscina emit `'error'` on
 * the pool — which kills the process unless someone listens, and no `try`
 * around `run()` sees it — and stop starting workers. So the worker entry
 * catches the failure, starts anyway, and rejects every task with a
 * {@link StartFailure}: a plain object, because a thrown object crosses the
 * thread boundary by structured clone, where an Error loses its `code`.
 * The owner turns it back into a {@link PoiseError} for the caller of `run()`.
 * @internal
 */
import { POISE_ERROR_CODES, PoiseError, type PoiseErrorCode } from '../core/errors.js';

/** The marker key of a {@link StartFailure}. */
const MARK = 'poiseWorkerStartFailure';

/** A worker's start-up failure, as its tasks reject with it. @internal */
export interface StartFailure {
  readonly [MARK]: true;
  /** What failed: loading the task module, or attaching the worker's Router. */
  readonly stage: 'task-module' | 'router';
  /** The task module's URL. */
  readonly url: string;
  /** The error's `code` (`ERR_MODULE_NOT_FOUND`, a PoiseError code), when it had one. */
  readonly code: string | undefined;
  readonly message: string;
}

/** The {@link StartFailure} for `err`, thrown while a worker started. @internal */
export function startFailure(stage: StartFailure['stage'], url: string, err: unknown): StartFailure {
  const code = (err as { code?: unknown } | null)?.code;
  return {
    [MARK]: true,
    stage,
    url,
    code: typeof code === 'string' ? code : undefined,
    message: err instanceof Error ? err.message : String(err),
  };
}

/**
 * `err` as the caller of `run()` sees it: a worker's {@link StartFailure}
 * becomes a PoiseError naming `options.filename` — `NotFound` when the task
 * module does not exist, `InvalidConfig` when it does not load, the
 * Router's own code when the worker could not attach — with the worker's
 * message; anything else is returned as it is. @internal
 */
export function runError(err: unknown): unknown {
  if (typeof err !== 'object' || err === null || (err as Record<string, unknown>)[MARK] !== true) return err;
  const f = err as StartFailure;
  if (f.stage === 'router') {
    const code = (POISE_ERROR_CODES as readonly string[]).includes(f.code ?? '') ? (f.code as PoiseErrorCode) : 'Unavailable';
    return new PoiseError(code, `createWorkerPool: a worker could not attach its router: ${f.message}`, { cause: f });
  }
  const missing = f.code === 'ERR_MODULE_NOT_FOUND';
  return new PoiseError(
    missing ? 'NotFound' : 'InvalidConfig',
    `options.filename: the task module ${f.url} ${missing ? 'does not exist' : 'failed to load'}: ${f.message}`,
    { field: 'options.filename', cause: f },
  );
}
