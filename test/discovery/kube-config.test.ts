/** Credentials from a kubeconfig and from a pod's service account (files in a temporary folder; no server). */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { defaultKubeconfig, inClusterCredentials, kubeconfigCredentials, resolveCredentials } from '../../src/discovery/kube-config.js';
import { rejection } from '../helpers/thrown.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'poise-kubeconfig-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

function kubeconfig(name: string, text: string): string {
  const file = path.join(dir, name);
  writeFileSync(file, text);
  return file;
}

const TWO_CONTEXTS = `apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: dev-cluster
  cluster:
    server: https://10.0.0.1:6443/
    certificate-authority: certs/ca.pem
    tls-server-name: kubernetes.default
- name: prod-cluster
  cluster:
    server: https://prod.example:443
    certificate-authority-data: ${Buffer.from('PROD CA').toString('base64')}
    insecure-skip-tls-verify: true
users:
- name: dev
  user:
    tokenFile: tokens/dev
- name: prod
  user:
    client-certificate-data: ${Buffer.from('CERT').toString('base64')}
    client-key: keys/prod.key
contexts:
- name: dev
  context: { cluster: dev-cluster, user: dev, namespace: team-a }
- name: prod
  context: { cluster: prod-cluster, user: prod }
`;

describe('kubeconfigCredentials', () => {
  mkdirSync(path.join(dir, 'certs'));
  mkdirSync(path.join(dir, 'keys'));
  writeFileSync(path.join(dir, 'certs/ca.pem'), 'DEV CA');
  writeFileSync(path.join(dir, 'keys/prod.key'), 'KEY');
  const file = kubeconfig('two.yaml', TWO_CONTEXTS);

  it('reads the current context: server, CA file relative to the kubeconfig, token file, namespace, TLS server name', async () => {
    const c = await kubeconfigCredentials(file);
    expect(c).toMatchObject({
      server: 'https://10.0.0.1:6443',
      token: undefined,
      tokenFile: path.join(dir, 'tokens/dev'),
      insecureSkipTlsVerify: false,
      tlsServerName: 'kubernetes.default',
      namespace: 'team-a',
      origin: `kubeconfig ${file} (context dev)`,
    });
    expect(c.ca?.toString()).toBe('DEV CA');
  });

  it('reads a named context: inline CA and certificate data, a key file, insecure-skip-tls-verify when set', async () => {
    const c = await kubeconfigCredentials(file, 'prod');
    expect([c.ca?.toString(), c.cert?.toString(), c.key?.toString()]).toEqual(['PROD CA', 'CERT', 'KEY']);
    expect(c.insecureSkipTlsVerify).toBe(true);
    expect(c.namespace).toBeUndefined();
  });

  it.each([
    [
      'no such context',
      TWO_CONTEXTS.replace('current-context: dev', 'current-context: qa'),
      `kubeconfig.contexts: ${path.join(dir, 'bad.yaml')} has no context named "qa"`,
    ],
    [
      'a certificate without its key',
      TWO_CONTEXTS.replace('    client-key: keys/prod.key\n', ''),
      'kubeconfig.users.prod: a client certificate needs its key (client-key) and the other way round',
      'prod',
    ],
    [
      'a server that is not a URL',
      TWO_CONTEXTS.replace('https://10.0.0.1:6443/', '10.0.0.1:6443'),
      'kubeconfig.clusters.dev-cluster.server: must be an https:// (or http://) URL, got "10.0.0.1:6443"',
    ],
    [
      'a CA file that is not there',
      TWO_CONTEXTS.replace('certs/ca.pem', 'certs/nope.pem'),
      'kubeconfig.clusters.dev-cluster.certificate-authority: cannot read certs/nope.pem',
    ],
    [
      'a non-boolean insecure flag',
      TWO_CONTEXTS.replace('insecure-skip-tls-verify: true', 'insecure-skip-tls-verify: "yes"'),
      'kubeconfig.clusters.prod-cluster.insecure-skip-tls-verify: must be a boolean',
      'prod',
    ],
  ] as [string, string, string, string?][])('refuses %s, naming the field', async (_, text, message, context) => {
    const bad = kubeconfig('bad.yaml', text);
    const err = await rejection(kubeconfigCredentials(bad, context));
    expect(err.code).toBe('InvalidConfig');
    expect(err.message.startsWith(message)).toBe(true);
  });

  it('$KUBECONFIG: the first file of the list; else ~/.kube/config', () => {
    expect(defaultKubeconfig({ KUBECONFIG: `${path.delimiter}/a/one${path.delimiter}/b/two` })).toBe('/a/one');
    expect(defaultKubeconfig({})).toBe(path.join(os.homedir(), '.kube', 'config'));
  });
});

describe('in-cluster credentials', () => {
  const sa = path.join(dir, 'sa');
  mkdirSync(sa);
  writeFileSync(path.join(sa, 'token'), 'tok');
  writeFileSync(path.join(sa, 'ca.crt'), 'CLUSTER CA');
  writeFileSync(path.join(sa, 'namespace'), 'team-b\n');

  it('the API server from KUBERNETES_SERVICE_HOST/PORT (an IPv6 host bracketed), the token as a file to re-read', async () => {
    const c = await inClusterCredentials({
      serviceAccountDir: sa,
      env: { KUBERNETES_SERVICE_HOST: 'fd00::1', KUBERNETES_SERVICE_PORT: '6443' },
    });
    expect(c).toMatchObject({
      server: 'https://[fd00::1]:6443',
      tokenFile: path.join(sa, 'token'),
      token: undefined,
      namespace: 'team-b',
      insecureSkipTlsVerify: false,
    });
    expect(c?.ca?.toString()).toBe('CLUSTER CA');
  });

  it('auto: in-cluster only when KUBERNETES_SERVICE_HOST is set, else the kubeconfig', async () => {
    const file = kubeconfig('auto.yaml', TWO_CONTEXTS);
    expect(
      (await resolveCredentials({ serviceAccountDir: sa, env: { KUBERNETES_SERVICE_HOST: '10.96.0.1' }, kubeconfig: file })).server,
    ).toBe('https://10.96.0.1:443');
    expect((await resolveCredentials({ serviceAccountDir: sa, env: {}, kubeconfig: file })).server).toBe('https://10.0.0.1:6443');
  });

  it('refuses a pod without a mounted token, naming the file', async () => {
    const err = await rejection(
      inClusterCredentials({ serviceAccountDir: path.join(dir, 'none'), env: { KUBERNETES_SERVICE_HOST: '10.96.0.1' } }),
    );
    expect(err.message).toBe(
      `credentials: in-cluster: KUBERNETES_SERVICE_HOST is set but ${path.join(dir, 'none', 'token')} does not exist (is a service account token mounted?)`,
    );
  });
});
