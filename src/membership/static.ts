/**
 * StaticMembership: the embedded default source — a document file (JSON or
 * YAML), watched and re-validated on every change, or an in-memory array.
 *
 * The watch is on the file's directory, not the file: editors and config
 * tools often save by writing a temporary file and renaming it over the
 * original, which ends a watch on the old inode. Events are debounced, and a
 * file that is momentarily missing or half-written is simply re-read on the
 * next event; a change that fails validation is logged and the last good
 * membership stays in force.
 *
 * The file is read through a size cap (`maxBytes`, at most that many bytes
 * plus one are ever read), so `/dev/zero` is refused as too large, not a crash.
 */
import { watch, type FSWatcher } from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { PoiseError, invalidConfig, isPoiseError } from '../core/errors.js';
import { resolveBackendSpecs, type BackendSpec, type MembershipSnapshot, type ResolvedBackendSpec } from '../core/spec.js';
import { defaultLogger } from '../log.js';
import {
  DEFAULT_MAX_DOCUMENT_BYTES,
  copySettings,
  formatOf,
  parseDocument,
  validateVersion,
  type DocumentFormat,
  type ResolvedDocument,
} from './document.js';
import { validateName } from './name.js';
import { readFileLimited } from './read-limited.js';
import { reportDelivery, type MembershipSource, type SnapshotListener } from './source.js';
import { integerIn } from '../core/validate.js';

/** What a {@link StaticMembership} serves: a document file, or backends in memory. */
export type StaticMembershipInput =
  | { file: string; format?: DocumentFormat }
  | { backends: readonly BackendSpec[]; cluster?: string; version?: number };

/** Options of {@link StaticMembership}. */
export interface StaticMembershipOptions {
  /** Watch the file and re-validate on change; default true (files only). */
  watch?: boolean;
  /** Quiet period after the last file event before re-reading; default 50 ms. */
  debounceMs?: number;
  /** Size cap of the file; default 1 MiB. */
  maxBytes?: number;
  /**
   * What start() does when the initial file is missing or invalid:
   * `'reject'` (default) rejects with the `PoiseError` (`NotFound`, a
   * validation code, `InvalidConfig` for a file over `maxBytes`);
   * `'wait'` logs it, keeps watching, delivers the first valid version the
   * file gets, and reports the reason as `problem` meanwhile (files only).
   */
  initial?: 'reject' | 'wait';
  /** pino logger; default {@link defaultLogger}. */
  logger?: Logger;
}

/**
 * A file or in-memory membership source.
 *
 * Versions: a document's `version`, when present, is used and must increase
 * on every change; without one, each accepted change gets the previous
 * version + 1 (the first is 1). Re-saving identical content is not a change.
 *
 * @example
 * const source = new StaticMembership({ file: '/etc/poise/members.yaml' });
 * await source.start((snapshot) => balancer.update(snapshot));
 *
 * const fixed = new StaticMembership({ backends: [{ id: 'a', address: '127.0.0.1:5432' }] });
 */
export class StaticMembership implements MembershipSource {
  readonly #input: StaticMembershipInput;
  readonly #watch: boolean;
  readonly #debounceMs: number;
  readonly #maxBytes: number;
  readonly #initial: 'reject' | 'wait';
  readonly #log: Logger;
  #version = 0;
  /** Whether a snapshot was delivered (a file may start at version 0). */
  #delivered = false;
  #problem: PoiseError | undefined;
  #listener: SnapshotListener | undefined;
  #watcher: FSWatcher | undefined;
  #timer: NodeJS.Timeout | undefined;
  #lastText: string | undefined;
  #reloading: Promise<number> | undefined;
  #reloadAgain = false;
  #closed = false;

  constructor(input: StaticMembershipInput, opts: StaticMembershipOptions = {}) {
    if (typeof input !== 'object' || input === null) invalidConfig('input', 'must be { file } or { backends }', input);
    if ('file' in input) {
      if (typeof input.file !== 'string' || input.file.length === 0) invalidConfig('input.file', 'must be a non-empty path', input.file);
      if (input.format !== undefined && input.format !== 'json' && input.format !== 'yaml') {
        invalidConfig('input.format', 'must be "json" or "yaml"', input.format);
      }
    } else if (!('backends' in input)) {
      invalidConfig('input', 'must have either a "file" or a "backends" field');
    } else {
      if (input.cluster !== undefined) validateName(input.cluster, 'input.cluster');
      if (input.version !== undefined) validateVersion(input.version, 'input.version');
    }
    const debounceMs = integerIn(opts.debounceMs ?? 50, 'options.debounceMs', 0, 60_000);
    const maxBytes = integerIn(opts.maxBytes ?? DEFAULT_MAX_DOCUMENT_BYTES, 'options.maxBytes', 1, 512 * 1024 * 1024);
    const initial = opts.initial ?? 'reject';
    if (initial !== 'reject' && initial !== 'wait') invalidConfig('options.initial', 'must be "reject" or "wait"', initial);
    this.#initial = initial;
    this.#input = input;
    this.#watch = opts.watch ?? true;
    this.#debounceMs = debounceMs;
    this.#maxBytes = maxBytes;
    this.#log = (opts.logger ?? defaultLogger()).child({ component: 'membership', source: 'file' in input ? input.file : 'memory' });
  }

  /** The version last delivered (0 before start). */
  get version(): number {
    return this.#version;
  }

  /** Why nothing was delivered yet (the initial file missing or invalid, with `initial: 'wait'`); undefined once a version was. */
  get problem(): PoiseError | undefined {
    return this.#problem;
  }

  /** `file <path>` or `memory`, for logs and errors. */
  get description(): string {
    return 'file' in this.#input ? `file ${this.#input.file}` : 'memory';
  }

  /**
   * Validates and delivers the initial membership, then starts watching the
   * file. Rejects with the {@link PoiseError} when the initial document is
   * missing (`NotFound`) or invalid: there is no last good membership to fall
   * back to — unless `initial: 'wait'`, which logs it and waits for a valid
   * version of the file instead.
   */
  async start(listener: SnapshotListener): Promise<void> {
    if (this.#listener !== undefined) invalidConfig('start', 'already started');
    this.#listener = listener;
    const input = this.#input;
    if ('file' in input) {
      try {
        this.#applyText(await readFileLimited(input.file, this.#maxBytes, 'input.file'));
      } catch (err) {
        if (this.#initial === 'reject' || !isPoiseError(err)) {
          this.#listener = undefined;
          throw err;
        }
        this.#problem = err;
        this.#log.error(
          { err: err.message, code: err.code, field: err.field },
          'membership file missing or invalid at start; waiting for a valid version of the file (nothing applied)',
        );
      }
      if (this.#watch) this.#startWatch(input.file);
    } else {
      this.#deliver(resolveBackendSpecs(input.backends), input.version ?? 1, input.cluster);
    }
  }

  /**
   * Replaces an in-memory membership; returns the new version. Throws (and
   * keeps the last good membership) when `backends` is invalid.
   */
  set(backends: readonly BackendSpec[], version?: number): number {
    if ('file' in this.#input) invalidConfig('set', 'only an in-memory StaticMembership can be set; edit the file instead');
    if (this.#listener === undefined) invalidConfig('set', 'call start() first');
    const resolved = resolveBackendSpecs(backends);
    const next = version === undefined ? this.#version + 1 : validateVersion(version);
    if (next <= this.#version) invalidConfig('version', `must be greater than the version in force ${this.#version}`, next);
    this.#deliver(resolved, next, this.#input.cluster);
    return next;
  }

  /**
   * Re-reads and re-validates the file now (the watcher calls this after
   * its debounce); resolves to the version in force afterwards. A rejected
   * change is logged, not thrown.
   */
  reload(): Promise<number> {
    if (!('file' in this.#input)) return Promise.resolve(this.#version);
    if (this.#reloading !== undefined) {
      this.#reloadAgain = true;
      return this.#reloading;
    }
    const file = this.#input.file;
    this.#reloading = (async () => {
      do {
        this.#reloadAgain = false;
        let text: string;
        try {
          text = await readFileLimited(file, this.#maxBytes, 'input.file');
        } catch (err) {
          if (!isPoiseError(err) || err.code === 'InvalidConfig') {
            this.#rejected(err);
            continue;
          }
          // Mid rename-replace, or deleted: keep the last good membership; the next event re-reads.
          this.#log.warn({ err: (err as Error).message, version: this.#version }, 'membership file unreadable; last good membership kept');
          if (!this.#delivered) this.#problem = err;
          continue;
        }
        if (this.#closed) break;
        try {
          this.#applyText(text);
        } catch (err) {
          this.#rejected(err);
        }
      } while (this.#reloadAgain && !this.#closed);
      this.#reloading = undefined;
      return this.#version;
    })();
    return this.#reloading;
  }

  /** Stops watching. Idempotent. */
  async close(): Promise<void> {
    this.#closed = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#watcher?.close();
    this.#watcher = undefined;
    await this.#reloading;
  }

  #rejected(err: unknown): void {
    if (!this.#delivered && isPoiseError(err)) this.#problem = err;
    this.#log.error(
      {
        err: (err as Error).message,
        code: isPoiseError(err) ? err.code : undefined,
        field: isPoiseError(err) ? err.field : undefined,
        version: this.#version,
      },
      'membership file change rejected; last good membership kept',
    );
  }

  #applyText(text: string): void {
    if (text === this.#lastText) return;
    const input = this.#input as { file: string; format?: DocumentFormat };
    const doc = parseDocument(text, { format: input.format ?? formatOf(input.file), maxBytes: this.#maxBytes });
    let version: number;
    if (doc.version === undefined) version = this.#version + 1;
    else if (!this.#delivered || doc.version > this.#version) version = doc.version;
    else {
      throw new PoiseError('Conflict', `version: ${doc.version} is not newer than the version in force ${this.#version}`, {
        field: 'version',
      });
    }
    this.#deliver(doc.backends, version, doc.cluster, doc);
    this.#lastText = text;
  }

  #deliver(backends: ResolvedBackendSpec[], version: number, cluster: string | undefined, settings?: ResolvedDocument): void {
    const snapshot: MembershipSnapshot = cluster === undefined ? { version, backends } : { version, cluster, backends };
    if (settings !== undefined) copySettings(settings, snapshot);
    const result = this.#listener!(snapshot);
    this.#version = version;
    this.#delivered = true;
    this.#problem = undefined;
    reportDelivery(this.#log, result, snapshot);
  }

  #startWatch(file: string): void {
    const dir = path.dirname(path.resolve(file));
    const base = path.basename(file);
    try {
      this.#watcher = watch(dir, { persistent: false }, (_event, name) => this.#onEvent(name, base));
    } catch (err) {
      // A directory that does not exist (or cannot be watched): nothing could ever arrive there.
      const e = err as NodeJS.ErrnoException;
      throw new PoiseError(
        e.code === 'ENOENT' ? 'NotFound' : 'Unavailable',
        `input.file: cannot watch the directory ${JSON.stringify(dir)}: ${e.message}`,
        {
          field: 'input.file',
          cause: err,
        },
      );
    }
    this.#watcher.on('error', (err) =>
      this.#log.error({ err: err.message }, 'membership file watch failed; changes are no longer picked up'),
    );
  }

  /** A directory event: re-read `base` after the debounce. */
  #onEvent(name: string | null, base: string): void {
    if (name !== null && name !== base) return;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => {
      this.#timer = undefined;
      void this.reload();
    }, this.#debounceMs);
  }
}
