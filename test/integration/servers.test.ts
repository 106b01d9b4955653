import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import config from '../../vitest.config.js';
import { freePort } from '../helpers/ports.js';
import { REQUIREMENTS, binary, built, mariadb, missingServers, postgres } from '../helpers/servers.js';

describe('the globalSetup that names missing servers', () => {
  let closed: number;
  // A TCP server that is neither PostgreSQL nor MariaDB: it accepts and hangs up.
  const impostor = net.createServer((s) => s.destroy());
  let impostorPort: number;

  beforeAll(async () => {
    closed = await freePort();
    await new Promise<void>((r) => impostor.listen(0, '127.0.0.1', () => r()));
    impostorPort = (impostor.address() as net.AddressInfo).port;
  });
  afterAll(() => new Promise<void>((r) => impostor.close(() => r())));

  it('is the globalSetup of the integration project, and of no other', () => {
    const projects = (config.test?.projects ?? []) as { test?: { name?: string; globalSetup?: string[] } }[];
    expect(projects.map((p) => [p.test?.name, p.test?.globalSetup])).toEqual([
      ['unit', undefined],
      ['integration', ['test/helpers/servers.ts']],
    ]);
    expect(config.test?.globalSetup).toBeUndefined();
  });

  it('passes on this machine: every requirement of the integration tests is there', async () => {
    expect(await missingServers(REQUIREMENTS)).toBeUndefined();
  });

  it('names a PostgreSQL that does not listen, the reason and how to start it', async () => {
    const message = await missingServers([postgres('127.0.0.1', closed), mariadb('127.0.0.1', 3306)]);
    expect(message).toBe(
      'the integration tests need these, and one is missing:\n' +
        `  - PostgreSQL on 127.0.0.1:${closed} (user postgres, database "test", trust auth): connect ECONNREFUSED 127.0.0.1:${closed}\n` +
        '    fix: service postgresql start && su postgres -c "createdb test"  (or set trust auth in pg_hba.conf)',
    );
  });

  it('names every missing one, in order, not just the first', async () => {
    const message = await missingServers([
      mariadb('127.0.0.1', closed),
      postgres('127.0.0.1', 5432),
      binary('poise-no-such-binary', ['--version'], 'install it'),
    ]);
    expect(message).toMatch(/^the integration tests need these, and some are missing:\n/);
    const named = message!.split('\n').filter((l) => l.startsWith('  - '));
    expect(named).toEqual([
      `  - MariaDB on 127.0.0.1:${closed} (user root, no password): connect ECONNREFUSED 127.0.0.1:${closed}`,
      '  - poise-no-such-binary on PATH: spawnSync poise-no-such-binary ENOENT',
    ]);
  });

  it('refuses a port where something else listens: the probe speaks the protocol', async () => {
    const message = await missingServers([postgres('127.0.0.1', impostorPort), mariadb('127.0.0.1', impostorPort)]);
    expect(message).toContain(`PostgreSQL on 127.0.0.1:${impostorPort}`);
    expect(message).toContain(`MariaDB on 127.0.0.1:${impostorPort}`);
  });

  it("refuses a PostgreSQL without the tests' database", async () => {
    const message = await missingServers([postgres('127.0.0.1', 5432, 'poise_no_such_db')]);
    expect(message).toContain('database "poise_no_such_db" does not exist');
  });

  it('names a build that is not there and how to make it', async () => {
    const message = await missingServers([built(['dist/src/index.js', 'dist/src/poise-no-such-file.js'])]);
    expect(message).toMatch(
      /^ {2}- the build in dist\/: ENOENT: no such file or directory, access '.*\/dist\/src\/poise-no-such-file\.js'$/m,
    );
    expect(message).toContain('    fix: npm run build  (npm test and npm run test:integration run it first)');
  });

  it('refuses a binary that exits non-zero', async () => {
    const message = await missingServers([binary('node', ['-e', 'process.exit(3)'], 'fix node')]);
    expect(message).toContain('  - node on PATH: `node -e process.exit(3)` exited with 3\n    fix: fix node');
  });
});
