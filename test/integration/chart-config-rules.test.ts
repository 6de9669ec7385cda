// What helm accepts is what the operator accepts: each rule of the operator's config that the
// generated values.schema.json cannot state as it stands (a key compared with another, a check
// made in code) fails `helm template` with a message, where a release used to render a config
// the operator refused at start-up (a pod crash-looping, or an upgrade without --wait
// reporting success over it). Each row also shows the operator refuses that config, so the
// chart refuses nothing the operator would take. docs/operations.md lists what helm still
// cannot see.
import { describe, expect, it } from 'vitest';
import { parseAllDocuments, parse as parseYaml } from 'yaml';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { parseEndpointPattern } from '../../operator/src/reconcile/model-endpoints.ts';
import { chartDir, helm } from '../support/helm.ts';

const template = (...args: string[]) => helm(['template', 'rules', chartDir, '--namespace', 'chamvi-system', ...args]);

interface Row {
  rule: string;
  values: string[];
  /** What helm says: the key and what is wrong. */
  helmSays: RegExp;
  /** The operator's config file holding the same values, and what the operator says of it. */
  operatorConfig: Record<string, unknown>;
  operatorSays: RegExp;
}

const rows: Row[] = [
  {
    rule: 'watchNamespaces lists a namespace twice',
    values: ['--set', 'config.watchNamespaces={team-a,team-a}'],
    helmSays: /\/config\/watchNamespaces': items at 0 and 1 are equal/,
    operatorConfig: { watchNamespaces: ['team-a', 'team-a'] },
    operatorSays: /watchNamespaces: lists a namespace more than once/,
  },
  {
    rule: 'the renew deadline is as long as the default lease',
    values: ['--set', 'leaderElection.renewDeadlineSeconds=15'],
    helmSays: /leaderElection: leaseDurationSeconds \(15\) must be greater than renewDeadlineSeconds \(15\)/,
    operatorConfig: { leaderElection: { renewDeadlineSeconds: 15 } },
    operatorSays: /leaseDurationSeconds must be greater than renewDeadlineSeconds/,
  },
  {
    rule: 'the retry period is as long as the renew deadline',
    values: ['--set', 'leaderElection.retryPeriodSeconds=10'],
    helmSays: /leaderElection: renewDeadlineSeconds \(10\) must be greater than retryPeriodSeconds \(10\)/,
    operatorConfig: { leaderElection: { retryPeriodSeconds: 10 } },
    operatorSays: /renewDeadlineSeconds must be greater than retryPeriodSeconds/,
  },
  {
    rule: 'a model endpoint has an upper-case host',
    values: ['--set', 'config.allowModelEndpoints={https://LLM.internal/v1}'],
    helmSays: /config\.allowModelEndpoints: "https:\/\/LLM\.internal\/v1" is not a canonical endpoint URL.*lower case/,
    operatorConfig: { allowModelEndpoints: ['https://LLM.internal/v1'] },
    operatorSays: /upper-case/,
  },
  {
    rule: 'a warm pool is in a namespace watchNamespaces does not list',
    values: ['--set', 'config.watchNamespaces={team-a}', '--set-json', 'config.warmPools=[{"name":"p","namespace":"other","size":1}]'],
    helmSays: /config\.warmPools: pool p is in namespace other, which config\.watchNamespaces does not list/,
    operatorConfig: { watchNamespaces: ['team-a'], warmPools: [{ name: 'p', namespace: 'other', size: 1 }] },
    operatorSays: /pool p is in namespace other, which watchNamespaces does not list/,
  },
  {
    rule: 'two warm pools have one name in one namespace',
    values: ['--set-json', 'config.warmPools=[{"name":"p","namespace":"a","size":1},{"name":"p","namespace":"a","size":2}]'],
    helmSays: /config\.warmPools: two pools are named p in namespace a/,
    operatorConfig: {
      warmPools: [
        { name: 'p', namespace: 'a', size: 1 },
        { name: 'p', namespace: 'a', size: 2 },
      ],
    },
    operatorSays: /two pools have the same namespace and name/,
  },
  {
    rule: 'a toleration with operator Exists has a value',
    values: ['--set-json', 'config.sandboxPlacement.tolerations=[{"key":"k","operator":"Exists","value":"v"}]'],
    helmSays: /config\.sandboxPlacement\.tolerations\[0\]: a toleration with operator Exists takes no value/,
    operatorConfig: { sandboxPlacement: { tolerations: [{ key: 'k', operator: 'Exists', value: 'v' }] } },
    operatorSays: /a toleration with operator Exists takes no value/,
  },
  {
    rule: 'a toleration has no key and operator Equal',
    values: ['--set-json', 'config.sandboxPlacement.tolerations=[{"effect":"NoSchedule"}]'],
    helmSays: /config\.sandboxPlacement\.tolerations\[0\]: a toleration without a key needs operator Exists/,
    operatorConfig: { sandboxPlacement: { tolerations: [{ effect: 'NoSchedule' }] } },
    operatorSays: /a toleration without a key needs operator Exists/,
  },
  {
    rule: 'egressProxy.address is not an IP address',
    values: ['--set', 'config.egressProxy.address=10.0.0'],
    helmSays: /\/config\/egressProxy\/address': 'anyOf' failed/,
    operatorConfig: { egressProxy: { address: '10.0.0' } },
    operatorSays: /egressProxy\.address: must be an IP address/,
  },
];

describe('the chart refuses at helm template what the operator refuses at start-up', () => {
  it.each(rows)('$rule', async ({ values, helmSays, operatorConfig, operatorSays }) => {
    expect(() => loadOperatorConfig(operatorConfig, {})).toThrow(operatorSays);
    const result = await template(...values);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(helmSays);
  });

  it('renders the same values once they are right', async () => {
    const result = await template(
      '--set',
      'config.watchNamespaces={team-a,team-b}',
      '--set',
      'leaderElection.leaseDurationSeconds=20',
      '--set',
      'leaderElection.renewDeadlineSeconds=15',
      '--set',
      'config.allowModelEndpoints={https://llm.internal/v1}',
      '--set-json',
      'config.warmPools=[{"name":"p","namespace":"team-a","size":1},{"name":"p","namespace":"team-b","size":1}]',
      '--set-json',
      'config.sandboxPlacement.tolerations=[{"operator":"Exists"},{"key":"k","value":"v"}]',
      '--set',
      'config.egressProxy.address=fd00::5',
    );
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    const configMap = parseAllDocuments(result.stdout)
      .map((doc) => doc.toJS() as { kind: string; metadata: { name: string }; data: Record<string, string> } | null)
      .find((doc) => doc?.kind === 'ConfigMap' && doc.metadata.name === 'rules-chamvi-operator-config')!;
    const config = loadOperatorConfig(parseYaml(configMap.data['config.yaml']!), {});
    expect(config.warmPools.map((pool) => pool.namespace)).toEqual(['team-a', 'team-b']);
    expect(config.leaderElection).toMatchObject({ leaseDurationSeconds: 20, renewDeadlineSeconds: 15 });
  });

  // The chart's endpoint grammar (templates/_config-checks.tpl) against parseEndpointPattern.
  const endpoints: Array<[string, 'both accept' | 'both refuse' | 'only the operator refuses']> = [
    ['https://llm.internal/v1', 'both accept'],
    ['https://llm.internal/v1/**', 'both accept'],
    ['https://llm.internal/openai/*/chat', 'both accept'],
    ['https://llm.internal', 'both accept'],
    ['https://llm.internal/v1/', 'both accept'],
    ['http://10.0.0.5:8080/v1', 'both accept'],
    ['https://[fd00::5]:8443/v1', 'both accept'],
    ["https://llm.internal/a,b;c=d:e/(x)'~!$&+/..v", 'both accept'],
    ['https://LLM.internal/v1', 'both refuse'],
    ['HTTPS://llm.internal/v1', 'both refuse'],
    ['https://llm.internal:443/v1', 'both refuse'],
    ['http://llm.internal:80', 'both refuse'],
    ['https://llm.internal:0443/v1', 'both refuse'],
    ['https://llm.internal:65536/v1', 'both refuse'],
    ['https://llm.internal:/v1', 'both refuse'],
    ['https://llm.internal./v1', 'both refuse'],
    ['https://-llm.internal/v1', 'both refuse'],
    ['https://llm_internal/v1', 'both refuse'],
    ['https://*.internal/v1', 'both refuse'],
    ['https://llm.internal:*/v1', 'both refuse'],
    ['https://llm.internal//v1', 'both refuse'],
    ['https://llm.internal/./v1', 'both refuse'],
    ['https://llm.internal/v1/..', 'both refuse'],
    ['https://llm.internal/v1/ä', 'both refuse'],
    ['https://llm.internal/v1/{x}', 'both refuse'],
    ['https://[FD00::5]/v1', 'both refuse'],
    ['ftp://llm.internal/v1', 'both refuse'],
    ['https://key@llm.internal/v1', 'both refuse'],
    ['https://llm.internal/v%31', 'both refuse'],
    ['https://llm.internal/v1?x=1', 'both refuse'],
    // Only a URL parser tells these are IP addresses written other than canonically:
    // docs/operations.md names them as what the operator alone refuses.
    ['https://127.1/v1', 'only the operator refuses'],
    ['https://010.0.0.1/v1', 'only the operator refuses'],
    ['https://[0::1]/v1', 'only the operator refuses'],
  ];

  it.each(endpoints)('decides allowModelEndpoints pattern %s as the operator does: %s', async (pattern, expected) => {
    const operatorAccepts = !('refused' in parseEndpointPattern(pattern));
    const rendered = await template('--set-json', `config.allowModelEndpoints=${JSON.stringify([pattern])}`);
    const helmAccepts = rendered.code === 0;
    if (!helmAccepts) expect(rendered.stderr).toMatch(/allowModelEndpoints/);
    const verdict =
      helmAccepts === operatorAccepts
        ? `both ${helmAccepts ? 'accept' : 'refuse'}`
        : helmAccepts
          ? 'only the operator refuses'
          : 'only helm refuses';
    expect(verdict).toBe(expected);
  });
});
