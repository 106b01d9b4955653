// libpq's connection forms as parsePgConnection reads them: a table of URIs, keyword strings, objects and PG*
// variables with the addresses and attributes each must give, and of malformed inputs with the field each
// PoiseError must name. The pools built on it: test/integration/pg-pools.test.ts.
import { describe, expect, it } from 'vitest';
import { parsePgConnection, type PgConnectionConfig } from '../../src/outbound/pg-connection.js';
import { thrown } from '../helpers/thrown.js';

const noEnv = { USER: 'me' };

interface Good {
  input: string | PgConnectionConfig;
  env?: Record<string, string>;
  addresses: string[];
  user?: string;
  database?: string;
  password?: string;
  tsa?: string;
  lb?: string;
}

const good: Good[] = [
  {
    input: 'postgresql://u@h1:5432,h2:5433,h3/db?target_session_attrs=read-write',
    addresses: ['h1:5432', 'h2:5433', 'h3:5432'],
    user: 'u',
    database: 'db',
    tsa: 'read-write',
  },
  { input: 'postgres://h1,h2', addresses: ['h1:5432', 'h2:5432'], user: 'me', database: 'me', tsa: 'any', lb: 'disable' },
  { input: 'postgresql://', addresses: ['localhost:5432'] },
  { input: 'postgresql:///app', addresses: ['localhost:5432'], database: 'app' },
  {
    input: 'postgresql://u:p%40ss@[::1]:6000,[fe80::2]/d',
    addresses: ['[::1]:6000', '[fe80::2]:5432'],
    user: 'u',
    password: 'p@ss',
    database: 'd',
  },
  {
    input: 'postgresql:///d?host=a,b&port=7001,7002&user=x&load_balance_hosts=random&target_session_attrs=prefer-standby&sslmode=require',
    addresses: ['a:7001', 'b:7002'],
    user: 'x',
    database: 'd',
    tsa: 'prefer-standby',
    lb: 'random',
  },
  { input: 'postgresql://h/d?dbname=other', addresses: ['h:5432'], database: 'other' },
  { input: 'host=h1,h2 port=5432,5433 dbname=app user=u', addresses: ['h1:5432', 'h2:5433'], user: 'u', database: 'app' },
  {
    input: "host = h1 port=6543 dbname='my db' password='it\\'s' target_session_attrs=standby",
    addresses: ['h1:6543'],
    database: 'my db',
    password: "it's",
    tsa: 'standby',
  },
  { input: 'host=h1,h2,h3 port=6000', addresses: ['h1:6000', 'h2:6000', 'h3:6000'] },
  { input: 'host=h1,,h3 port=1,2,3', addresses: ['h1:1', 'localhost:2', 'h3:3'] },
  {
    input: 'dbname=app',
    env: { PGHOST: 'e1,e2', PGPORT: '5001,5002', PGUSER: 'eu' },
    addresses: ['e1:5001', 'e2:5002'],
    user: 'eu',
    database: 'app',
  },
  { input: 'host=h1', env: { PGHOST: 'e1', PGPORT: '5001' }, addresses: ['h1:5001'] },
  {
    input: '',
    env: { PGTARGETSESSIONATTRS: 'primary', PGLOADBALANCEHOSTS: 'random', PGDATABASE: 'envdb' },
    addresses: ['localhost:5432'],
    tsa: 'primary',
    lb: 'random',
    database: 'envdb',
  },
  {
    input: { host: ['a', 'b'], port: [1, 2], user: 'o', database: 'od', target_session_attrs: 'read-only' },
    addresses: ['a:1', 'b:2'],
    user: 'o',
    database: 'od',
    tsa: 'read-only',
  },
  { input: { host: 'a,b', port: 7000 }, addresses: ['a:7000', 'b:7000'] },
];

describe('parsePgConnection: libpq forms', () => {
  it.each(good)('$input', (c) => {
    const p = parsePgConnection(c.input, { ...noEnv, ...c.env });
    expect(p.addresses).toEqual(c.addresses);
    if (c.user !== undefined) expect(p.user).toBe(c.user);
    if (c.database !== undefined) expect(p.database).toBe(c.database);
    expect(p.password).toBe(c.password ?? undefined);
    expect(p.targetSessionAttrs).toBe(c.tsa ?? 'any');
    expect(p.loadBalanceHosts).toBe(c.lb ?? 'disable');
  });

  it('takes each of libpq six target_session_attrs values', () => {
    for (const v of ['any', 'read-write', 'read-only', 'primary', 'standby', 'prefer-standby']) {
      expect(parsePgConnection(`host=h target_session_attrs=${v}`, noEnv).targetSessionAttrs).toBe(v);
    }
  });
});

const bad: Array<{ input: string | PgConnectionConfig; env?: Record<string, string>; field: string; reason: RegExp }> = [
  { input: 'postgresql://h?target_session_attrs=master', field: 'target_session_attrs', reason: /must be one of any, read-write/ },
  { input: 'host=h target_session_attrs=READ-WRITE', field: 'target_session_attrs', reason: /got "READ-WRITE"/ },
  { input: 'host=h', env: { PGTARGETSESSIONATTRS: 'replica' }, field: 'target_session_attrs', reason: /must be one of/ },
  { input: 'postgresql://h?load_balance_hosts=roundrobin', field: 'load_balance_hosts', reason: /"disable" or "random"/ },
  { input: 'host=h1,h2,h3 port=1,2', field: 'port', reason: /2 ports for 3 hosts/ },
  { input: 'postgresql://h:0', field: 'port', reason: /\[1, 65535\]/ },
  { input: 'postgresql://h:99999', field: 'port', reason: /\[1, 65535\]/ },
  { input: 'host=h port=54x2', field: 'port', reason: /integer/ },
  { input: 'host=/var/run/postgresql', field: 'host', reason: /unix-domain socket/ },
  { input: 'postgresql://[::1/db', field: 'host', reason: /unbalanced/ },
  { input: 'postgresql://u%zz@h', field: 'user', reason: /percent-encoding/ },
  { input: "host=h dbname='open", field: 'dbname', reason: /unterminated/ },
  { input: 'host h', field: 'connection', reason: /name=value/ },
  { input: 'postgresql://h/d?=x', field: 'connection', reason: /name=value/ },
  { input: { host: 'h', port: {} as unknown as number }, field: 'port', reason: /string, a number or an array/ },
  { input: { host: 'h', user: 7 as unknown as string }, field: 'user', reason: /must be a string/ },
  { input: 5 as unknown as string, field: 'connection', reason: /connection string or an object/ },
];

describe('parsePgConnection: malformed input', () => {
  it.each(bad)('$input → $field', (c) => {
    const e = thrown(() => parsePgConnection(c.input, { ...noEnv, ...c.env }));
    expect(e.code).toBe('InvalidConfig');
    expect(e.field).toBe(c.field);
    expect(e.message).toMatch(new RegExp(`^${c.field}: `));
    expect(e.message).toMatch(c.reason);
  });
});
