/** Every command and subcommand answers --help and -h: exit 0, its usage on stdout, nothing on stderr. */
import { describe, expect, it } from 'vitest';
import { runCli } from '../../helpers/cli.js';

describe('poise --help, for every command', () => {
  it.each([
    [['--help'], 'usage: poise <command> [flags]'],
    [['help'], 'usage: poise <command> [flags]'],
    [['proxy', '--help'], 'usage: poise proxy --listen HOST:PORT'],
    [['proxy', '-h'], 'usage: poise proxy --listen HOST:PORT'],
    [['proxy', '--bogus', '--help'], 'usage: poise proxy --listen HOST:PORT'],
    [['bench', '--help'], 'usage: poise bench [flags]'],
    [['bench', '--workers', '0', '-h'], 'usage: poise bench [flags]'],
    [['members', '--help'], 'usage: poise members <subcommand>'],
    [['members', 'show', '--help'], 'usage: poise members show [--json]'],
    [['top', '--help'], 'usage: poise top (--metrics URL [--timeout D] [--max-bytes N] | --redis URL --cluster NAME'],
    [['top', '-h'], 'usage: poise top (--metrics URL [--timeout D] [--max-bytes N] | --redis URL --cluster NAME'],
    [['members', 'apply', '--help'], 'usage: poise members apply FILE|-'],
    [['members', 'watch', '-h'], 'usage: poise members watch [--count N] [--json]'],
    [['members', 'add', '--wieght', '2', '--help'], 'usage: poise members add ID HOST:PORT'],
  ])('poise %j', async (args, usage) => {
    const r = await runCli(args);
    expect([r.code, r.stderr]).toEqual([0, '']);
    expect(r.stdout.startsWith(usage)).toBe(true);
  });

  it('no command, an unknown command or subcommand: exit 2 with the usage', async () => {
    expect(await runCli([])).toMatchObject({ code: 2, stdout: expect.stringContaining('usage: poise <command> [flags]') });
    expect(await runCli(['frob'])).toMatchObject({ code: 2, stderr: expect.stringContaining('poise: unknown command "frob"') });
    expect(await runCli(['members'])).toMatchObject({ code: 2, stderr: expect.stringContaining('usage: poise members <subcommand>') });
  });
});
