// The spec schema is what the operator re-validates every run with; these tests pin its
// defaults and the cross-field rules (the same rules the CRD carries as CEL).
import { describe, expect, it } from 'vitest';
import { buildCodingRunCrd } from '../../operator/src/api/crd.ts';
import { codingRunSpec, envNameRule, modelRules, TOOL_NAMES } from '../../operator/src/api/index.ts';

const scripted = {
  task: 'Fix the bug',
  repository: { url: 'https://github.com/acme/webapp.git' },
  model: { provider: 'scripted', scriptRef: { name: 'demo-script' } },
};

describe('codingRunSpec', () => {
  it('fills every default a user may leave out', () => {
    const spec = codingRunSpec.parse(scripted);
    expect(spec.budget).toEqual({ maxSteps: 40, timeout: '30m' });
    expect(spec.approval).toEqual({ tools: [], timeout: '24h' });
    expect(spec.tools.allow).toEqual([...TOOL_NAMES]);
    expect(spec.model.scriptRef).toEqual({ name: 'demo-script', key: 'script.json' });
    expect(spec.model.contextWindow).toBe(128_000);
    expect(spec.sandbox).toEqual({ egress: { allow: [] } });
  });

  it('keeps values the user gave instead of defaults', () => {
    const spec = codingRunSpec.parse({ ...scripted, budget: { maxSteps: 3, maxTokens: 1000 }, tools: { allow: ['read_file'] } });
    expect(spec.budget).toEqual({ maxSteps: 3, maxTokens: 1000, timeout: '30m' });
    expect(spec.tools.allow).toEqual(['read_file']);
  });

  it.each([
    ['an empty task', { ...scripted, task: '' }, 'task'],
    ['maxSteps 0', { ...scripted, budget: { maxSteps: 0 } }, 'budget.maxSteps'],
    ['maxSteps 1001', { ...scripted, budget: { maxSteps: 1001 } }, 'budget.maxSteps'],
    ['a bad duration', { ...scripted, budget: { timeout: '10 minutes' } }, 'budget.timeout'],
    ['a budget timeout past 720h', { ...scripted, budget: { timeout: '720h1s' } }, 'budget.timeout'],
    ['an approval timeout past 168h', { ...scripted, approval: { timeout: '169h' } }, 'approval.timeout'],
    ['a timeout too long for a duration', { ...scripted, budget: { timeout: `${'9'.repeat(40)}h` } }, 'budget.timeout'],
    ['an unknown tool', { ...scripted, tools: { allow: ['rm_rf'] } }, 'tools.allow.0'],
    ['an option-like url', { ...scripted, repository: { url: '--upload-pack=touch /tmp/x' } }, 'repository.url'],
    ['an env var with a bad name', { ...scripted, sandbox: { env: [{ name: '1X', value: 'y' }] } }, 'sandbox.env.0.name'],
    ['a huge quantity string', { ...scripted, sandbox: { resources: { limits: { cpu: 'lots' } } } }, 'sandbox.resources.limits.cpu'],
    // A zero timeout made a pod and a clone only to end DeadlineExceeded, or denied every gated call at once.
    ['a zero budget timeout', { ...scripted, budget: { timeout: '0s' } }, 'budget.timeout'],
    ['a budget timeout of 0h0m', { ...scripted, budget: { timeout: '0h0m' } }, 'budget.timeout'],
    ['a budget timeout under a millisecond', { ...scripted, budget: { timeout: '0.0001s' } }, 'budget.timeout'],
    ['a zero approval timeout', { ...scripted, approval: { tools: ['bash'], timeout: '0ms' } }, 'approval.timeout'],
    // A zero verify timeout was clamped at use to a check that could never pass in time.
    ['a zero verify timeout', { ...scripted, verify: { command: 'npm test', timeout: '0s' } }, 'verify.timeout'],
    ['a verify timeout under a millisecond', { ...scripted, verify: { command: 'npm test', timeout: '0.0001s' } }, 'verify.timeout'],
    // These passed kubectl apply, then the pod create got 422 and the run failed SandboxInvalid.
    ['a negative memory limit', { ...scripted, sandbox: { resources: { limits: { memory: '-1Gi' } } } }, 'sandbox.resources.limits.memory'],
    ['a signed cpu request', { ...scripted, sandbox: { resources: { requests: { cpu: '+1' } } } }, 'sandbox.resources.requests.cpu'],
    ['a negative integer request', { ...scripted, sandbox: { resources: { requests: { cpu: -1 } } } }, 'sandbox.resources.requests.cpu'],
    ['an unknown resource name', { ...scripted, sandbox: { resources: { requests: { foo: 1 } } } }, 'sandbox.resources.requests'],
    // Bounded so the API server can cost the rule comparing a request with its limit.
    [
      'a quantity of 65 characters',
      { ...scripted, sandbox: { resources: { limits: { cpu: '1'.repeat(65) } } } },
      'sandbox.resources.limits.cpu',
    ],
    // Kubernetes' quantity parser spent minutes of an API server core on it (kubernetes-names.ts QUANTITY).
    [
      'an exponent of four digits',
      { ...scripted, sandbox: { resources: { limits: { memory: '1e1000' } } } },
      'sandbox.resources.limits.memory',
    ],
    // An extended resource would give whoever may create runs GPU pods through the operator's ServiceAccount.
    ['a GPU limit', { ...scripted, sandbox: { resources: { limits: { 'nvidia.com/gpu': 8 } } } }, 'sandbox.resources.limits'],
    // A zero limit is no limit: the kubelet sets none, and a ResourceQuota on limits counts the pod as 0.
    ['a cpu limit of "0"', { ...scripted, sandbox: { resources: { limits: { cpu: '0' } } } }, 'sandbox.resources.limits'],
    ['a memory limit of integer 0', { ...scripted, sandbox: { resources: { limits: { memory: 0 } } } }, 'sandbox.resources.limits'],
    ['a memory limit of 0Gi', { ...scripted, sandbox: { resources: { limits: { memory: '0Gi' } } } }, 'sandbox.resources.limits'],
    ['a cpu limit of 0.000m', { ...scripted, sandbox: { resources: { limits: { cpu: '0.000m' } } } }, 'sandbox.resources.limits'],
    [
      'an ephemeral-storage limit of 0e9',
      { ...scripted, sandbox: { resources: { limits: { 'ephemeral-storage': '0e9' } } } },
      'sandbox.resources.limits',
    ],
  ])('refuses %s and names the field', (_, input, path) => {
    const result = codingRunSpec.safeParse(input);
    expect(result.success).toBe(false);
    expect(result.error!.issues.map((issue) => issue.path.join('.'))).toContain(path);
  });

  it('says which resource names a sandbox may ask for', () => {
    const result = codingRunSpec.safeParse({ ...scripted, sandbox: { resources: { limits: { 'nvidia.com/gpu': 8 } } } });
    expect(result.error!.issues.map((issue) => issue.message).join('\n')).toContain(
      'resource names may only be cpu, memory and ephemeral-storage',
    );
  });

  it('says a limit must be above zero, and why', () => {
    const result = codingRunSpec.safeParse({ ...scripted, sandbox: { resources: { limits: { cpu: '0', memory: 0 } } } });
    expect(result.error!.issues).toEqual([
      expect.objectContaining({
        path: ['sandbox', 'resources', 'limits'],
        message: expect.stringMatching(/each limit must be above zero/),
      }),
    ]);
  });

  // Kubernetes rounds a quantity that is not zero up to 1n, so the smallest is above zero; a request of 0 asks for nothing, which is allowed.
  it('takes the smallest limits above zero, and requests of zero', () => {
    const resources = { requests: { cpu: 0, memory: '0' }, limits: { cpu: '1n', memory: '0.1', 'ephemeral-storage': '1e-400' } };
    expect(codingRunSpec.safeParse({ ...scripted, sandbox: { resources } }).error?.issues).toBeUndefined();
  });

  // The API server refuses a pod whose request is above its limit: the run failed SandboxInvalid after acceptance.
  it.each([
    ['cpu 4 over a limit of 2', { requests: { cpu: '4' }, limits: { cpu: '2' } }],
    ['cpu 2001m over an integer limit of 2', { requests: { cpu: '2001m' }, limits: { cpu: 2 } }],
    ['memory 5Gi over 4G', { requests: { memory: '5Gi' }, limits: { memory: '4G' } }],
    ['storage 1e10 over 9Gi', { requests: { 'ephemeral-storage': '1e10' }, limits: { 'ephemeral-storage': '9Gi' } }],
  ])('refuses a request above its limit (%s), naming the requests', (_, resources) => {
    const result = codingRunSpec.safeParse({ ...scripted, sandbox: { resources } });
    expect(result.success).toBe(false);
    expect(result.error!.issues).toEqual([
      expect.objectContaining({ path: ['sandbox', 'resources', 'requests'], message: expect.stringMatching(/at most its limit/) }),
    ]);
  });

  it.each([
    ['equal quantities written differently', { requests: { cpu: '700m', memory: '1Gi' }, limits: { cpu: '0.7', memory: '1024Mi' } }],
    ['a request below its limit', { requests: { cpu: 1 }, limits: { cpu: '1500m' } }],
    ['a request whose limit is left to the defaults', { requests: { cpu: '8' }, limits: { memory: '1Gi' } }],
  ])('takes %s', (_, resources) => {
    expect(codingRunSpec.safeParse({ ...scripted, sandbox: { resources } }).error?.issues).toBeUndefined();
  });

  it('carries the request-within-limit rule as CEL on the resources, with the quantity library', () => {
    type Node = { properties: Record<string, Node> } & Record<string, unknown>;
    const root = buildCodingRunCrd().spec.versions[0]!.schema.openAPIV3Schema as unknown as Node;
    const resources = root.properties.spec!.properties.sandbox!.properties.resources!;
    expect(resources['x-kubernetes-validations']).toEqual([
      expect.objectContaining({
        rule: expect.stringContaining('quantity(string(self.requests[name])).compareTo('),
        fieldPath: '.requests',
      }),
    ]);
  });

  it('keeps the shortest positive timeouts and every core resource a sandbox may ask for', () => {
    const spec = codingRunSpec.parse({
      ...scripted,
      budget: { timeout: '1ms' },
      approval: { timeout: '1s' },
      sandbox: {
        resources: {
          requests: { cpu: '0.5', memory: '0', 'ephemeral-storage': '1e9' },
          limits: { cpu: 2, memory: '4Gi', 'ephemeral-storage': '.5Ti' },
        },
      },
    });
    expect(spec.budget.timeout).toBe('1ms');
    expect(spec.approval.timeout).toBe('1s');
    expect(spec.sandbox.resources?.limits).toEqual({ cpu: 2, memory: '4Gi', 'ephemeral-storage': '.5Ti' });
  });
});

describe('model cross-field rules', () => {
  const cases: Array<[string, Record<string, unknown>, string | undefined]> = [
    ['scripted with a script', { provider: 'scripted', scriptRef: { name: 's' } }, undefined],
    ['scripted without a script', { provider: 'scripted' }, 'scriptRef is required'],
    [
      'scripted with a key',
      { provider: 'scripted', scriptRef: { name: 's' }, apiKeySecretRef: { name: 'k' } },
      'apiKeySecretRef may not be set',
    ],
    ['openai with key and name', { provider: 'openai', name: 'gpt-5.6', apiKeySecretRef: { name: 'k' } }, undefined],
    ['openai without a key', { provider: 'openai', name: 'gpt-5.6' }, 'apiKeySecretRef is required'],
    ['openai without a name', { provider: 'openai', apiKeySecretRef: { name: 'k' } }, 'name is required'],
    [
      'openai with a baseURL',
      { provider: 'openai', name: 'm', apiKeySecretRef: { name: 'k' }, baseURL: 'https://x/v1' },
      'baseURL may only be set',
    ],
    [
      'openai-compatible without a baseURL',
      { provider: 'openai-compatible', name: 'm', apiKeySecretRef: { name: 'k' } },
      'baseURL is required',
    ],
    [
      'openai-compatible with a baseURL',
      { provider: 'openai-compatible', name: 'm', apiKeySecretRef: { name: 'k' }, baseURL: 'http://127.0.0.1:1/v1' },
      undefined,
    ],
    [
      'groq with a script',
      { provider: 'groq', name: 'm', apiKeySecretRef: { name: 'k' }, scriptRef: { name: 's' } },
      'scriptRef may only be set',
    ],
  ];

  it.each(cases)('%s', (_, model, expected) => {
    const result = codingRunSpec.safeParse({ ...scripted, model });
    if (expected === undefined) {
      expect(result.error?.issues).toBeUndefined();
    } else {
      expect(result.success).toBe(false);
      expect(result.error!.issues.map((issue) => issue.message).join('\n')).toContain(expected);
    }
  });

  it('gives every rule a CEL expression, a message and a field', () => {
    for (const rule of modelRules) {
      expect(rule.rule).toMatch(/self\./);
      expect(rule.message.length).toBeGreaterThan(20);
      expect(rule.fieldPath).toMatch(/^\.[a-zA-Z]+$/);
    }
  });
});

// The toolbox runs as node in the sandbox container with the pod's variables: CHAMVI_WORKSPACE=/
// broke the import. NODE_OPTIONS is the run's own: a bad one only breaks that run.
describe('spec.sandbox.env names the toolbox keeps for itself', () => {
  const withEnv = (name: string, value = 'x') =>
    codingRunSpec.safeParse({
      ...scripted,
      sandbox: {
        env: [
          { name: 'CI', value: '1' },
          { name, value },
        ],
      },
    });

  it.each(['CHAMVI_WORKSPACE', 'CHAMVI_HOME', 'CHAMVI_'])('refuses %s, naming the field and saying why', (name) => {
    const result = withEnv(name);
    expect(result.success).toBe(false);
    expect(result.error!.issues).toEqual([
      expect.objectContaining({
        path: ['sandbox', 'env', 1, 'name'],
        message: expect.stringMatching(/toolbox reads those for its own settings.*Rename the variable/),
      }),
    ]);
  });

  it.each(['HOME', 'TMPDIR', 'PATH', 'NODE_ENV', 'MY_CHAMVI_X', 'NODE_OPTIONS_X'])("takes %s, which stays the run's to set", (name) => {
    expect(withEnv(name).error?.issues).toBeUndefined();
  });

  // A larger heap for jest or tsc is common, and stored runs use it: refusing it failed them on upgrade.
  it('takes NODE_OPTIONS, such as a larger heap for jest or tsc', () => {
    expect(withEnv('NODE_OPTIONS', '--max-old-space-size=4096').error?.issues).toBeUndefined();
  });

  // node's spawn throws on one, and the container runtime refuses the pod: failed after acceptance.
  it('refuses a value with a NUL byte, naming the field', () => {
    const result = withEnv('X', 'a\u0000b');
    expect(result.success).toBe(false);
    expect(result.error!.issues).toEqual([
      expect.objectContaining({ path: ['sandbox', 'env', 1, 'value'], message: expect.stringMatching(/NUL byte/) }),
    ]);
  });

  it('carries the NUL refusal as the value pattern in the CRD, which the API server checks with RE2', () => {
    type Node = { properties: Record<string, Node>; items: Node; pattern?: string };
    const root = buildCodingRunCrd().spec.versions[0]!.schema.openAPIV3Schema as unknown as Node;
    const pattern = root.properties.spec!.properties.sandbox!.properties.env!.items.properties.value!.pattern!;
    expect(pattern).toBe('^[^\\x00]*$');
    expect(new RegExp(pattern).test('a\u0000b')).toBe(false);
    expect(new RegExp(pattern).test('a$(b)\nc')).toBe(true);
  });

  it('carries the same rule as CEL on the env item, with the field it is about', () => {
    expect(envNameRule.rule).toBe("!self.name.startsWith('CHAMVI_')");
    expect(envNameRule.fieldPath).toBe('.name');
    type Node = { properties: Record<string, Node>; items: Node & Record<string, unknown> };
    const root = buildCodingRunCrd().spec.versions[0]!.schema.openAPIV3Schema as unknown as Node;
    const item = root.properties.spec!.properties.sandbox!.properties.env!.items;
    expect(item['x-kubernetes-validations']).toEqual([
      { rule: envNameRule.rule, message: envNameRule.message, fieldPath: '.name', reason: 'FieldValueForbidden' },
    ]);
  });
});
