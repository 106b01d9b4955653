import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import config from '../vitest.config.js';
import { freePort } from './helpers/ports.js';
import { REQUIREMENTS, binary, mariadb, missingServers, postgres } from './helpers/servers.js';

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

  it('is the vitest globalSetup', () => {
    expect(config.test?.globalSetup).toEqual(['test/helpers/servers.ts']);
  });

  it('passes on this machine: every requirement of npm test is there', async () => {
    expect(await missingServers(REQUIREMENTS)).toBeUndefined();
  });

  it('names a PostgreSQL that does not listen, the reason and how to start it', async () => {
    const message = await missingServers([postgres('127.0.0.1', closed), mariadb('127.0.0.1', 3306)]);
    expect(message).toBe(
      'npm test needs these local servers and tools, and one is missing:\n' +
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
    expect(message).toMatch(/^npm test needs these local servers and tools, and some are missing:\n/);
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

  it('refuses a binary that exits non-zero', async () => {
    const message = await missingServers([binary('node', ['-e', 'process.exit(3)'], 'fix node')]);
    expect(message).toContain('  - node on PATH: `node -e process.exit(3)` exited with 3\n    fix: fix node');
  });
});
