import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';

describe('loadOperatorConfig', () => {
  it('has the documented defaults', () => {
    const config = loadOperatorConfig(undefined, {});
    expect(config).toMatchObject({
      allowRepo: [],
      redisUrl: 'redis://127.0.0.1:6379',
      workerConcurrency: 8,
      maxActiveRuns: 100,
      watchNamespaces: [],
      networkPolicy: true,
    });
  });

  it('lets environment variables override the file', () => {
    const config = loadOperatorConfig(
      { maxActiveRuns: 5, allowRepo: ['https://a/*'] },
      { CHAMVI_MAX_ACTIVE_RUNS: '7', CHAMVI_ALLOW_REPO: 'https://b/*, https://c/*' },
    );
    expect(config.maxActiveRuns).toBe(7);
    expect(config.allowRepo).toEqual(['https://b/*', 'https://c/*']);
  });

  it("sets one key of a section from the environment and keeps the file's others", () => {
    const file = {
      egressProxy: { service: 'chamvi-egress', namespace: 'chamvi-system' },
      publish: { forges: [{ host: 'git.internal', kind: 'gitea' }], author: { name: 'Bot', email: 'bot@acme.dev' } },
      leaderElection: { leaseName: 'team-a' },
    };
    const config = loadOperatorConfig(file, {
      CHAMVI_EGRESS_PROXY_PORT: '3130',
      CHAMVI_PUBLISH_AUTHOR_NAME: 'Agent',
      CHAMVI_LEADER_ELECTION_NAMESPACE: 'ops',
    });
    expect(config.egressProxy).toMatchObject({ service: 'chamvi-egress', namespace: 'chamvi-system', port: 3130 });
    expect(config.publish.forges).toEqual([expect.objectContaining({ host: 'git.internal', kind: 'gitea' })]);
    expect(config.publish.author).toMatchObject({ name: 'Agent', email: 'bot@acme.dev' });
    expect(config.leaderElection).toMatchObject({ leaseName: 'team-a', namespace: 'ops' });
  });

  it('refuses a namespace listed twice in watchNamespaces', () => {
    expect(() => loadOperatorConfig({ watchNamespaces: ['team-a', 'team-a'] }, {})).toThrow(
      'config key watchNamespaces: lists a namespace more than once',
    );
  });

  it('refuses a warm pool in a namespace watchNamespaces does not list, naming both', () => {
    const pool = { name: 'fast', namespace: 'agents', size: 2 };
    expect(() => loadOperatorConfig({ watchNamespaces: ['team-a'], warmPools: [pool] }, {})).toThrow(
      'config key warmPools: pool fast is in namespace agents, which watchNamespaces does not list',
    );
    expect(loadOperatorConfig({ watchNamespaces: ['team-a', 'agents'], warmPools: [pool] }, {}).warmPools).toHaveLength(1);
    expect(loadOperatorConfig({ warmPools: [pool] }, {}).warmPools).toHaveLength(1);
  });

  it('takes namespaceMaxActiveRuns from the file or CHAMVI_NAMESPACE_MAX_ACTIVE_RUNS, unset unless given, and refuses 0', () => {
    expect(loadOperatorConfig({}, {}).namespaceMaxActiveRuns).toBeUndefined();
    expect(loadOperatorConfig({ namespaceMaxActiveRuns: 20 }, {}).namespaceMaxActiveRuns).toBe(20);
    expect(loadOperatorConfig({}, { CHAMVI_NAMESPACE_MAX_ACTIVE_RUNS: '4' }).namespaceMaxActiveRuns).toBe(4);
    expect(() => loadOperatorConfig({ namespaceMaxActiveRuns: 0 }, {})).toThrow(/namespaceMaxActiveRuns/);
  });

  it('refuses leader election timings under which two replicas could lead at once', () => {
    expect(loadOperatorConfig({}, {}).leaderElection).toMatchObject({
      leaseDurationSeconds: 15,
      renewDeadlineSeconds: 10,
      retryPeriodSeconds: 2,
    });
    expect(() => loadOperatorConfig({ leaderElection: { leaseDurationSeconds: 10, renewDeadlineSeconds: 10 } }, {})).toThrow(
      /leaderElection\.renewDeadlineSeconds: leaseDurationSeconds must be greater than renewDeadlineSeconds/,
    );
    expect(() => loadOperatorConfig({ leaderElection: { renewDeadlineSeconds: 2 } }, {})).toThrow(
      /renewDeadlineSeconds must be greater than retryPeriodSeconds/,
    );
  });

  it('cuts model call attempts at modelCallTimeoutSeconds, 300 unless set (file or CHAMVI_MODEL_CALL_TIMEOUT_SECONDS)', () => {
    expect(loadOperatorConfig(undefined, {}).modelCallTimeoutSeconds).toBe(300);
    expect(loadOperatorConfig({ modelCallTimeoutSeconds: 120 }, {}).modelCallTimeoutSeconds).toBe(120);
    expect(loadOperatorConfig({ modelCallTimeoutSeconds: 120 }, { CHAMVI_MODEL_CALL_TIMEOUT_SECONDS: '30' }).modelCallTimeoutSeconds).toBe(
      30,
    );
  });

  it("kills spec.sandbox.setup at setupTimeoutSeconds, 1800 unless set, never above the toolbox's 30-minute cap", () => {
    expect(loadOperatorConfig(undefined, {}).setupTimeoutSeconds).toBe(1800);
    expect(loadOperatorConfig({ setupTimeoutSeconds: 600 }, { CHAMVI_SETUP_TIMEOUT_SECONDS: '5' }).setupTimeoutSeconds).toBe(5);
    expect(() => loadOperatorConfig({ setupTimeoutSeconds: 1801 }, {})).toThrow(/config key setupTimeoutSeconds: /);
  });

  it.each([
    [{ maxActiveRuns: 0 }, {}, /config key maxActiveRuns: /],
    [{ modelCallTimeoutSeconds: 0 }, {}, /config key modelCallTimeoutSeconds: /],
    [{ redisUrl: 'http://x' }, {}, /config key redisUrl: must be a redis:\/\//],
    [{ allowRepos: ['x'] }, {}, /config key allowRepos: /],
    [{}, { CHAMVI_NETWORK_POLICY: 'yes' }, /config key networkPolicy \(env CHAMVI_NETWORK_POLICY\): must be true or false/],
    [{}, { CHAMVI_WORKER_CONCURRENCY: 'many' }, /config key workerConcurrency: /],
    [['not', 'a', 'map'], {}, /config file: must be a YAML mapping/],
    // The chart's schema refuses these too (it is generated from the same zod schema).
    [{}, { CHAMVI_WATCH_NAMESPACES: 'team-a,Team_B' }, /config key watchNamespaces.1: must be a namespace name/],
    [{ workspaceSizeLimit: '10 gigs' }, {}, /config key workspaceSizeLimit: must be a quantity/],
    [{ allowRepo: ['https://github.com/acme/ x'] }, {}, /config key allowRepo.0: .*has characters no canonical repository URL has/],
  ])('stops on %j %j with a message naming the key', (file, env, message) => {
    expect(() => loadOperatorConfig(file, env)).toThrow(message);
  });
});

describe('docs/operations.md "Environment overrides"', () => {
  /** Every variable loadOperatorConfig reads, as it reads them: an environment that records each name asked for. */
  function variablesRead(): Set<string> {
    const read = new Set<string>();
    const env = new Proxy({} as NodeJS.ProcessEnv, {
      get: (_target, name) => {
        if (typeof name === 'string') read.add(name);
        return undefined;
      },
    });
    loadOperatorConfig(undefined, env);
    return read;
  }

  /** The variables of the section's table, one a row. */
  function variablesDocumented(): Set<string> {
    const docs = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');
    const section = /^### Environment overrides\n([\s\S]*?)^#/m.exec(docs)?.[1] ?? '';
    return new Set([...section.matchAll(/^\| `([A-Z][A-Z0-9_]*)` \|/gm)].map((match) => match[1]!));
  }

  it('has a row for each variable the operator reads, and none for a variable it does not', () => {
    const read = variablesRead();
    const documented = variablesDocumented();
    expect(read).toContain('CHAMVI_ALLOW_REPO');
    expect(read).toContain('CHAMVI_LEADER_ELECTION_NAMESPACE');
    expect([...read].filter((name) => !documented.has(name))).toEqual([]);
    expect([...documented].filter((name) => !read.has(name))).toEqual([]);
  });
});
