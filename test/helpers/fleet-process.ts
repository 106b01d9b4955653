/**
 * One process of a fleet test (a fixture script that reads JSON-line
 * commands on stdin and answers each with one JSON line on stdout).
 */
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { createInterface } from 'node:readline';

/** A fleet process, driven by JSON lines; `{ error }` answers reject. */
export class FleetProcess {
  readonly child: ChildProcessWithoutNullStreams;
  readonly #waiters: ((line: string) => void)[] = [];
  /** Resolves on the script's first line (it has started). */
  readonly started: Promise<unknown>;

  constructor(script: URL) {
    this.child = spawn(process.execPath, [script.pathname], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.child.stderr.resume();
    createInterface({ input: this.child.stdout }).on('line', (line) => this.#waiters.shift()?.(line));
    this.started = new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Sends one command; resolves to its answer. */
  ask<T>(msg: object): Promise<T> {
    return new Promise((resolve, reject) => {
      this.#waiters.push((line) => {
        const out = JSON.parse(line) as T & { error?: string };
        if (out.error !== undefined) reject(new Error(out.error));
        else resolve(out);
      });
      this.child.stdin.write(`${JSON.stringify(msg)}\n`);
    });
  }

  /** SIGKILL; resolves when the process is gone. */
  kill(): Promise<void> {
    return new Promise((resolve) => {
      if (this.child.exitCode !== null || this.child.signalCode !== null) return resolve();
      this.child.once('exit', () => resolve());
      this.child.kill('SIGKILL');
    });
  }
}
