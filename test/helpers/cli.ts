/**
 * Runs the compiled `poise` CLI (dist/, built by `npm test`'s pretest) as a
 * child process and collects its exit code and output.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** The compiled CLI entry. */
export const CLI = fileURLToPath(new URL('../../dist/src/cli/main.js', import.meta.url));

/** Exit code and output of one CLI run. */
export interface CliResult {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** `node dist/src/cli/main.js ...args`, with `stdin` written to its standard input and `env` added to the environment. */
export function runCli(args: string[], stdin = '', env: Record<string, string> = {}): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], { stdio: ['pipe', 'pipe', 'pipe'], env: { ...process.env, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(stdin);
  });
}
