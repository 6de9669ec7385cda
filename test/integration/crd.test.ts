// The generated CRD against a real API server: it is accepted, `kubectl explain` shows
// its descriptions, the examples apply, and bad manifests are refused at `kubectl apply`
// with a message that names the offending field.
import { readdirSync, readFileSync } from 'node:fs';
import { beforeAll, describe, expect, it } from 'vitest';
import { parseAllDocuments, stringify } from 'yaml';
import type { CodingRun } from '../../operator/src/api/index.ts';
import { parseSpec } from '../../operator/src/reconcile/validate-run.ts';
import { createNamespace, kubectl } from '../support/cluster.ts';

const NAMESPACE = 'crd-test';
const examplesDir = new URL('../../examples/', import.meta.url);

const valid = {
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRun',
  metadata: { name: 'valid', namespace: NAMESPACE },
  spec: {
    task: 'Fix it',
    repository: { url: 'https://github.com/acme/webapp.git' },
    model: { provider: 'openai', name: 'gpt-5.6', apiKeySecretRef: { name: 'llm' } },
  },
};

type Manifest = typeof valid & { spec: Record<string, unknown> };
const withSpec = (name: string, change: (spec: Record<string, any>) => void): Manifest => {
  const manifest = structuredClone(valid) as Manifest;
  manifest.metadata.name = name;
  change(manifest.spec);
  return manifest;
};

const apply = (manifest: object) => kubectl(['apply', '-f', '-'], { input: stringify(manifest) });

beforeAll(async () => {
  await createNamespace(NAMESPACE, { restricted: true });
});

describe('the CodingRun CRD on a real API server', () => {
  it('is established', async () => {
    const result = await kubectl(['wait', '--for=condition=Established', '--timeout=60s', 'crd/codingruns.chamvi.dev']);
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
  });

  it('prints field descriptions with kubectl explain', async () => {
    // The API server publishes the CRD's OpenAPI a moment after it is established.
    let result = await kubectl(['explain', 'codingrun.spec.budget']);
    for (let attempt = 0; attempt < 30 && !result.stdout.includes('maxSteps'); attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 1000));
      result = await kubectl(['explain', 'codingrun.spec.budget']);
    }
    expect(result.code).toBe(0);
    expect(result.stdout).toContain('Limits on the run');
    expect(result.stdout).toMatch(/maxSteps\s+<integer>/);
    expect(result.stdout).toContain('Most model calls the run may make');
    expect(result.stdout).toContain('DeadlineExceeded');
  });

  it.each(readdirSync(examplesDir).filter((file) => file.endsWith('.yaml')))('accepts examples/%s', async (file) => {
    const text = readFileSync(new URL(file, examplesDir), 'utf8');
    expect(parseAllDocuments(text).length).toBeGreaterThan(0);
    const result = await kubectl(['apply', '-n', NAMESPACE, '-f', '-'], { input: text });
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(
      /(codingrun|codingruntemplate|codingschedule|codingeval)\.chamvi\.dev\/\S+ (created|unchanged|configured)/,
    );
  });

  it("stores the spec as written: the defaults are the operator schema's, stated by kubectl explain (#15.3)", async () => {
    expect((await apply(valid)).code).toBe(0);
    const result = await kubectl(['get', 'crun', 'valid', '-n', NAMESPACE, '-o', 'json']);
    // Server-side defaults would override a template's values (docs/schedules.md); every reader parses with them instead.
    expect(JSON.parse(result.stdout).spec).toEqual(valid.spec);
    const explained = await kubectl(['explain', 'codingrun.spec.budget.maxSteps']);
    expect(explained.stdout).toContain('default 40');
  });

  it('shows the printer columns, with Repo and Reason in wide output', async () => {
    await apply(valid);
    const plain = await kubectl(['get', 'crun', '-n', NAMESPACE]);
    expect(plain.stdout.split('\n')[0]).toMatch(/^NAME\s+PHASE\s+STEPS\s+TOKENS\s+AGE$/);
    const wide = await kubectl(['get', 'crun', '-n', NAMESPACE, '-o', 'wide']);
    expect(wide.stdout.split('\n')[0]).toMatch(/^NAME\s+PHASE\s+STEPS\s+TOKENS\s+AGE\s+REPO\s+REASON\s+VERIFIED\s+QUEUE\s+TEMPLATE$/);
    expect(wide.stdout).toContain('https://github.com/acme/webapp.git');
  });

  const invalid: Array<[string, Manifest, RegExp]> = [
    ['a missing task', withSpec('no-task', (s) => delete s.task), /spec\.task: Required value/],
    [
      'an empty task',
      withSpec('empty-task', (s) => (s.task = '')),
      /spec\.task: Invalid value: "": spec\.task in body should be at least 1 chars long/,
    ],
    ['a missing repository', withSpec('no-repo', (s) => delete s.repository), /spec\.repository: Required value/],
    ['a missing model', withSpec('no-model', (s) => delete s.model), /spec\.model: Required value/],
    [
      'a negative maxSteps',
      withSpec('neg-steps', (s) => (s.budget = { maxSteps: -1 })),
      /spec\.budget\.maxSteps: Invalid value: -1: spec\.budget\.maxSteps in body should be greater than or equal to 1/,
    ],
    [
      'a huge maxSteps',
      withSpec('huge-steps', (s) => (s.budget = { maxSteps: 1_000_000 })),
      /spec\.budget\.maxSteps: Invalid value: 1000000: spec\.budget\.maxSteps in body should be less than or equal to 1000/,
    ],
    [
      'a maxSteps of the wrong type',
      withSpec('string-steps', (s) => (s.budget = { maxSteps: 'forty' })),
      /spec\.budget\.maxSteps: Invalid value: "string": spec\.budget\.maxSteps in body must be of type integer/,
    ],
    [
      'a full ref as the branch to publish to',
      withSpec('ref-branch', (s) => (s.publish = { branch: 'refs/heads/main', credentialsSecretRef: { name: 'push-token' } })),
      /spec\.publish\.branch: Invalid value: "string": must be a branch name alone: not "HEAD" and not a full ref/,
    ],
    [
      'HEAD as the pull request base',
      withSpec('head-base', (s) => (s.publish = { credentialsSecretRef: { name: 'push-token' }, pullRequest: { base: 'HEAD' } })),
      /spec\.publish\.pullRequest\.base: Invalid value: "string": must be a branch name alone/,
    ],
    [
      'a label with a comma',
      withSpec(
        'comma-label',
        (s) => (s.publish = { credentialsSecretRef: { name: 'push-token' }, pullRequest: { labels: ['bug,urgent'] } }),
      ),
      /spec\.publish\.pullRequest\.labels\[0\]: Invalid value: "bug,urgent": spec\.publish\.pullRequest\.labels\[0\] in body should match '\^\[\^,\]\+\$'/,
    ],
    [
      'an unknown provider',
      withSpec('bad-provider', (s) => (s.model.provider = 'anthropic-direct')),
      /spec\.model\.provider: Unsupported value: "anthropic-direct"/,
    ],
    [
      'a baseURL with openai',
      withSpec('openai-baseurl', (s) => (s.model.baseURL = 'https://llm.internal/v1')),
      /spec\.model\.baseURL: Forbidden: baseURL may only be set with provider openai-compatible/,
    ],
    [
      'openai-compatible without baseURL',
      withSpec('compat-no-url', (s) => (s.model.provider = 'openai-compatible')),
      /spec\.model\.baseURL: Required value: baseURL is required when provider is openai-compatible/,
    ],
    [
      'scripted without scriptRef',
      withSpec('scripted-no-script', (s) => (s.model = { provider: 'scripted' })),
      /spec\.model\.scriptRef: Required value: scriptRef is required with provider scripted/,
    ],
    [
      'a real provider without apiKeySecretRef',
      withSpec('no-key', (s) => delete s.model.apiKeySecretRef),
      /spec\.model\.apiKeySecretRef: Required value: apiKeySecretRef is required/,
    ],
    [
      'a real provider without a model name',
      withSpec('no-name', (s) => delete s.model.name),
      /spec\.model\.name: Required value: name is required/,
    ],
    [
      'scriptRef with openai',
      withSpec('openai-script', (s) => (s.model.scriptRef = { name: 'x' })),
      /spec\.model\.scriptRef: Forbidden: scriptRef may only be set with provider scripted/,
    ],
    [
      'a bad budget duration',
      withSpec('bad-timeout', (s) => (s.budget = { timeout: 'ten minutes' })),
      /spec\.budget\.timeout: Invalid value: "ten minutes": spec\.budget\.timeout in body should match/,
    ],
    [
      'a bad approval duration',
      withSpec('bad-approval-timeout', (s) => (s.approval = { timeout: '1d' })),
      /spec\.approval\.timeout: Invalid value: "1d"/,
    ],
    // Unbounded, these made a sandbox pod whose activeDeadlineSeconds (budget.timeout plus
    // maxSteps approval waits) the API server refuses: the run was accepted, then waited Pending.
    [
      'a budget timeout past 720h',
      withSpec('long-timeout', (s) => (s.budget = { timeout: '720h1s' })),
      /spec\.budget\.timeout: Invalid value: "string": must be at most 720h/,
    ],
    [
      'an approval timeout past 168h',
      withSpec('long-approval', (s) => (s.approval = { tools: ['bash'], timeout: '1000000h' })),
      /spec\.approval\.timeout: Invalid value: "string": must be at most 168h/,
    ],
    [
      'a budget timeout too long for a duration',
      withSpec('overflow-timeout', (s) => (s.budget = { timeout: '99999999999999999999h' })),
      /spec\.budget\.timeout/,
    ],
    [
      'an unknown tool name',
      withSpec('bad-tool', (s) => (s.tools = { allow: ['read_file', 'rm_rf'] })),
      /spec\.tools\.allow\[1\]: Unsupported value: "rm_rf"/,
    ],
    [
      'an unknown tool to approve',
      withSpec('bad-approval-tool', (s) => (s.approval = { tools: ['sudo'] })),
      /spec\.approval\.tools\[0\]: Unsupported value: "sudo"/,
    ],
    [
      'a namespace inside a secret ref',
      withSpec('cross-ns', (s) => (s.model.apiKeySecretRef = { name: 'llm', namespace: 'kube-system' })),
      /unknown field "spec\.model\.apiKeySecretRef\.namespace"/,
    ],
    [
      'a secret reference in sandbox env',
      withSpec('env-secret', (s) => (s.sandbox = { env: [{ name: 'TOKEN', valueFrom: { secretKeyRef: { name: 'x', key: 'y' } } }] })),
      /unknown field "spec\.sandbox\.env\[0\]\.valueFrom"/,
    ],
    // The toolbox is node in the same container: these moved its workspace or its logs.
    [
      'a CHAMVI_ variable in sandbox env',
      withSpec(
        'env-chamvi',
        (s) =>
          (s.sandbox = {
            env: [
              { name: 'CI', value: '1' },
              { name: 'CHAMVI_WORKSPACE', value: '/' },
            ],
          }),
      ),
      /spec\.sandbox\.env\[1\]\.name: Forbidden: may not start with CHAMVI_: the sandbox's toolbox reads those/,
    ],
    // No process environment can hold a NUL: the run failed only after it was accepted.
    [
      'a NUL byte in a sandbox env value',
      withSpec('env-nul', (s) => (s.sandbox = { env: [{ name: 'X', value: 'a\u0000b' }] })),
      /spec\.sandbox\.env\[0\]\.value: Invalid value: "a[^"]+b": spec\.sandbox\.env\[0\]\.value in body should match/,
    ],
    // Refused at apply, not by the pod create after the run is accepted (SandboxInvalid).
    [
      'a negative memory limit',
      withSpec('neg-memory', (s) => (s.sandbox = { resources: { limits: { memory: '-1Gi' } } })),
      /spec\.sandbox\.resources\.limits\.memory: Invalid value: "-1Gi"/,
    ],
    [
      'a request above its limit',
      withSpec('request-over-limit', (s) => (s.sandbox = { resources: { requests: { cpu: '4' }, limits: { cpu: '2000m' } } })),
      /spec\.sandbox\.resources\.requests: Invalid value: "object": each request may be at most its limit/,
    ],
    // A zero limit is no limit: the kubelet sets none and a ResourceQuota on limits counts the pod as 0.
    [
      'a cpu limit of "0"',
      withSpec('zero-cpu-limit', (s) => (s.sandbox = { resources: { limits: { cpu: '0' } } })),
      /spec\.sandbox\.resources\.limits: Invalid value: "object": each limit must be above zero/,
    ],
    [
      'a memory limit of integer 0',
      withSpec('zero-memory-limit', (s) => (s.sandbox = { resources: { limits: { memory: 0 } } })),
      /spec\.sandbox\.resources\.limits: Invalid value: "object": each limit must be above zero/,
    ],
    // Kubernetes' quantity parser, which CEL's isQuantity() calls, spent minutes of an API server
    // core on a long exponent, even on a value the schema's pattern refuses: these came back
    // only when the request timed out, and the API server went on burning a core after.
    [
      'a limit with a ten-digit exponent beside a request',
      withSpec('huge-exponent', (s) => (s.sandbox = { resources: { requests: { memory: '1' }, limits: { memory: '1e2147483648' } } })),
      /spec\.sandbox\.resources\.limits\.memory: Invalid value: "1e2147483648"/,
    ],
    [
      'a signed limit with a ten-digit exponent',
      withSpec('huge-signed-exponent', (s) => (s.sandbox = { resources: { limits: { cpu: '+1e2147483648' } } })),
      /spec\.sandbox\.resources\.limits\.cpu: Invalid value: "\+1e2147483648"/,
    ],
    [
      'an extended resource',
      withSpec('gpu', (s) => (s.sandbox = { resources: { limits: { 'nvidia.com/gpu': 8 } } })),
      /spec\.sandbox\.resources\.limits: Invalid value: "object": resource names may only be cpu, memory and ephemeral-storage/,
    ],
    [
      'a zero budget timeout',
      withSpec('zero-timeout', (s) => (s.budget = { ...s.budget, timeout: '0s' })),
      /spec\.budget\.timeout: Invalid value: "string": must be at least 1ms/,
    ],
    [
      'an option-like repository url',
      withSpec('option-url', (s) => (s.repository.url = '--upload-pack=touch /tmp/pwned')),
      /spec\.repository\.url: Invalid value: "--upload-pack=touch \/tmp\/pwned"/,
    ],
    // The worker fetches the revision, and git reads it as a refspec: these wrote refs into the
    // clone the clone cache hands to other namespaces (a replace ref shows another tree).
    [
      'a revision that is a refspec',
      withSpec('refspec-revision', (s) => (s.repository.revision = 'main:refs/heads/planted')),
      /spec\.repository\.revision: Invalid value: "main:refs\/heads\/planted": spec\.repository\.revision in body should match/,
    ],
    [
      'a revision that is a glob refspec into refs/replace',
      withSpec('replace-revision', (s) => (s.repository.revision = 'refs/heads/*:refs/replace/*')),
      /spec\.repository\.revision: Invalid value: "refs\/heads\/\*:refs\/replace\/\*"/,
    ],
    [
      'a revision that is a forced refspec',
      withSpec('forced-revision', (s) => (s.repository.revision = '+refs/heads/main')),
      /spec\.repository\.revision: Invalid value: "string": must be a git ref name: it may not start with "-" \(an option to git\) or "\+"/,
    ],
    [
      'a revision with a NUL byte',
      withSpec('nul-revision', (s) => (s.repository.revision = 'main\u0000')),
      /spec\.repository\.revision: Invalid value: "main[^"]+": spec\.repository\.revision in body should match/,
    ],
    [
      'a revision with a ".." in it',
      withSpec('dots-revision', (s) => (s.repository.revision = 'refs/heads/../x')),
      /spec\.repository\.revision: Invalid value: "string": must be a git ref name: no "\.\.", "\/\/" or "@\{"/,
    ],
    [
      'a revision with a part ending in .lock',
      withSpec('lock-revision', (s) => (s.repository.revision = 'team.lock/x')),
      /spec\.repository\.revision: Invalid value: "string": must be a git ref name: no part between slashes may start with "\." or end with "\.lock"/,
    ],
    [
      'a publish branch template with a part ending in .lock',
      withSpec('lock-branch', (s) => (s.publish = { branch: 'team.lock/{run}', credentialsSecretRef: { name: 'push-token' } })),
      /spec\.publish\.branch: Invalid value: "string": must be a git ref name: no part between slashes may start with "\." or end with "\.lock"/,
    ],
    // RE2 reads \s as [\t\n\f\r ] only: these passed apply and then failed in the operator.
    [
      'a repository url ending in a no-break space',
      withSpec('nbsp-url', (s) => (s.repository.url = 'https://github.com/acme/webapp.git\u00a0')),
      /spec\.repository\.url: Invalid value: "[^"]+": spec\.repository\.url in body should match/,
    ],
    [
      'a revision ending in a no-break space',
      withSpec('nbsp-revision', (s) => (s.repository.revision = 'main\u00a0')),
      /spec\.repository\.revision: Invalid value: "main[^"]+": spec\.repository\.revision in body should match/,
    ],
    [
      'a baseURL with an ideographic space',
      withSpec('nbsp-baseurl', (s) => {
        s.model.provider = 'openai-compatible';
        s.model.baseURL = 'https://llm.internal/v1\u3000';
      }),
      /spec\.model\.baseURL: Invalid value: "[^"]+": spec\.model\.baseURL in body should match/,
    ],
    [
      'publish without any token and without a template',
      withSpec('publish-no-token', (s) => (s.publish = {})),
      /spec\.publish: Required value: spec\.publish needs a token that may push/,
    ],
    [
      'a tiny context window',
      withSpec('small-window', (s) => (s.model.contextWindow = 10)),
      /spec\.model\.contextWindow: Invalid value: 10/,
    ],
    [
      'a quantity that is not one',
      withSpec('bad-quantity', (s) => (s.sandbox = { resources: { limits: { memory: 'lots' } } })),
      /spec\.sandbox\.resources\.limits\.memory/,
    ],
  ];

  it('accepts the longest timeouts, as the operator does', async () => {
    const longest = withSpec('longest-timeouts', (s) => {
      s.budget = { timeout: '719h60m' };
      s.approval = { tools: ['bash'], timeout: '168h' };
    });
    const result = await apply(longest);
    expect(result.stderr).toBe('');
    expect(parseSpec(longest as unknown as CodingRun).ok).toBe(true);
  });

  // A larger heap for jest or tsc: NODE_OPTIONS is the run's own, and stored runs use it.
  it('accepts NODE_OPTIONS in sandbox env, and requests equal to their limits written differently, as the operator does', async () => {
    const manifest = withSpec('env-node-options', (s) => {
      s.sandbox = {
        env: [{ name: 'NODE_OPTIONS', value: '--max-old-space-size=4096' }],
        resources: { requests: { cpu: '700m', memory: '1Gi' }, limits: { cpu: '0.7', memory: '1024Mi' } },
      };
    });
    const result = await apply(manifest);
    expect(result.stderr).toBe('');
    expect(parseSpec(manifest as unknown as CodingRun).ok).toBe(true);
  });

  // Kubernetes rounds a quantity that is not zero up to 1n: the API server and the operator agree where zero ends.
  it('accepts requests of zero and the smallest limits above zero, as the operator does', async () => {
    const manifest = withSpec('smallest-limits', (s) => {
      s.sandbox = { resources: { requests: { cpu: 0, memory: '0' }, limits: { cpu: '1n', memory: '0.1', 'ephemeral-storage': '1e-400' } } };
    });
    const result = await apply(manifest);
    expect(result.stderr).toBe('');
    expect(parseSpec(manifest as unknown as CodingRun).ok).toBe(true);
  });

  it('accepts the revisions git takes, as the operator does: a branch, a tag, a full ref, a commit id', async () => {
    const revisions = ['feature/x', 'v1.2.3', 'refs/pull/12/head', 'a'.repeat(40), 'b'.repeat(64)];
    for (const [index, revision] of revisions.entries()) {
      const manifest = withSpec(`revision-${index}`, (s) => (s.repository.revision = revision));
      const result = await apply(manifest);
      expect(result.stderr).toBe('');
      expect(parseSpec(manifest as unknown as CodingRun).ok).toBe(true);
    }
  });

  it.each(invalid)('refuses %s and names the field', async (_, manifest, message) => {
    const result = await apply(manifest);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(message);
    const left = await kubectl(['get', 'crun', manifest.metadata.name, '-n', NAMESPACE, '--ignore-not-found', '-o', 'name']);
    expect(left.stdout).toBe('');
  });

  describe('spec.templateRef (#15.3)', () => {
    const templated = (name: string, spec: Record<string, unknown>) => ({
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: { name, namespace: NAMESPACE },
      spec: { templateRef: { name: 'webapp' }, ...spec },
    });

    it('is described by kubectl explain', async () => {
      const result = await kubectl(['explain', 'codingrun.spec.templateRef']);
      expect(result.code).toBe(0);
      expect(result.stdout.replace(/\s+/g, ' ')).toContain("Start from a CodingRunTemplate in this run's namespace");
      expect(result.stdout).toContain('TemplateNotFound');
      const status = await kubectl(['explain', 'codingrun.status.template']);
      expect(status.stdout.replace(/\s+/g, ' ')).toContain('a later edit of the template does not change a run already accepted');
    });

    it('accepts a run that leaves task, repository and model to its template, and stores it as written', async () => {
      const result = await apply(templated('from-template', { budget: { maxSteps: 5 } }));
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      const stored = JSON.parse((await kubectl(['get', 'crun', 'from-template', '-n', NAMESPACE, '-o', 'json'])).stdout).spec;
      expect(stored).toEqual({ templateRef: { name: 'webapp' }, budget: { maxSteps: 5 } });
      const wide = await kubectl(['get', 'crun', 'from-template', '-n', NAMESPACE, '-o', 'wide', '--no-headers']);
      expect(wide.stdout).toMatch(/\swebapp\s*$/);
    });

    // The API server sees the run as stored: the template's token is not there, and the
    // operator checks the merged spec (test/unit/publish-decisions.test.ts).
    it('accepts a run that publishes with the token its template gives, and one without a repository of its own', async () => {
      const withOwnRepository = templated('publish-template-token', {
        repository: { url: 'https://github.com/acme/webapp.git', revision: 'release' },
        publish: {},
      });
      const result = await apply(withOwnRepository);
      expect(result.stderr).toBe('');
      expect(result.code).toBe(0);
      const bare = await apply(templated('publish-template-only', { publish: { branch: 'fix/{run}' } }));
      expect(bare.stderr).toBe('');
      expect(bare.code).toBe(0);
    });

    it.each([
      [
        'no task and no template',
        withSpec('no-task-no-template', (s) => delete s.task),
        /spec\.task: Required value: spec\.task is required unless spec\.templateRef/,
      ],
      [
        'a template name that is not a name',
        templated('bad-template-name', { templateRef: { name: 'Web_App' } }),
        /spec\.templateRef\.name/,
      ],
      ['an empty templateRef', templated('empty-template-ref', { templateRef: {} }), /spec\.templateRef\.name: Required value/],
      [
        'a model of its own that breaks its rules, template or not',
        templated('templated-bad-model', { model: { provider: 'openai', name: 'gpt-5.6' } }),
        /spec\.model\.apiKeySecretRef: Required value/,
      ],
      [
        'a repository of its own without its url',
        templated('templated-no-url', { repository: { revision: 'develop' } }),
        /spec\.repository\.url: Required value/,
      ],
    ])('refuses %s', async (_, manifest, message) => {
      const result = await apply(manifest);
      expect(result.code).not.toBe(0);
      expect(result.stderr).toMatch(message);
    });

    it('refuses to change the template, or to add a field the template gave, once the run exists', async () => {
      expect((await apply(templated('fixed-template', { task: 'Fix it' }))).code).toBe(0);
      const renamed = await apply(templated('fixed-template', { task: 'Fix it', templateRef: { name: 'other' } }));
      expect(renamed.stderr).toMatch(/spec\.templateRef: Forbidden: spec\.templateRef cannot change after the run is created/);
      const added = await apply(templated('fixed-template', { task: 'Fix it', repository: { url: 'https://github.com/acme/other.git' } }));
      expect(added.stderr).toMatch(/spec\.repository: Forbidden: spec\.repository cannot change after the run is created/);
      const dropped = await apply(templated('fixed-template', {}));
      expect(dropped.stderr).toMatch(/spec\.task: Forbidden: spec\.task cannot change/);
      const rebudget = await apply(templated('fixed-template', { task: 'Fix it', budget: { maxSteps: 3 } }));
      expect(rebudget.stderr).toBe('');
    });

    // For a run that names a template, absent instructions are the template's and "" is none:
    // the two compared equal, and a patch to "" took the template's instructions from a run
    // mid-way (the workers merge the prompt anew at every step).
    it('refuses instructions set to "" on a run that leaves them to its template, and dropped from one that set ""', async () => {
      const template = {
        apiVersion: 'chamvi.dev/v1alpha1',
        kind: 'CodingRunTemplate',
        metadata: { name: 'webapp-instructions', namespace: NAMESPACE },
        spec: { instructions: 'Never touch the migrations.' },
      };
      expect((await apply(template)).code).toBe(0);
      const fromTemplate = templated('template-instructions', { task: 'Fix it', templateRef: { name: 'webapp-instructions' } });
      expect((await apply(fromTemplate)).code).toBe(0);
      const patch = (name: string, type: string, body: object) =>
        kubectl(['patch', 'crun', name, '-n', NAMESPACE, '--type', type, '-p', JSON.stringify(body)]);
      const emptied = await patch('template-instructions', 'merge', { spec: { instructions: '' } });
      expect(emptied.code).not.toBe(0);
      expect(emptied.stderr).toMatch(/spec\.instructions: Forbidden: spec\.instructions cannot change after the run is created/);
      const stored = JSON.parse((await kubectl(['get', 'crun', 'template-instructions', '-n', NAMESPACE, '-o', 'json'])).stdout);
      expect(stored.spec).not.toHaveProperty('instructions');

      const withoutAny = templated('no-instructions', { task: 'Fix it', templateRef: { name: 'webapp-instructions' }, instructions: '' });
      expect((await apply(withoutAny)).code).toBe(0);
      const dropped = await patch('no-instructions', 'json', [{ op: 'remove', path: '/spec/instructions' }]);
      expect(dropped.code).not.toBe(0);
      expect(dropped.stderr).toMatch(/spec\.instructions: Forbidden/);
      // Unchanged is no change.
      expect((await patch('no-instructions', 'merge', { spec: { instructions: '' } })).code).toBe(0);
    });
  });

  it('refuses to change what a run works on, and allows a new budget', async () => {
    await apply(withSpec('immutable', () => {}));
    const retask = await apply(withSpec('immutable', (s) => (s.task = 'Something else')));
    expect(retask.code).not.toBe(0);
    expect(retask.stderr).toMatch(/spec\.task: Forbidden: spec\.task cannot change after the run is created/);
    // The gates an approver answers under, and where an approved change is pushed, stay as created.
    const ungated = await apply(withSpec('immutable', (s) => (s.approval = { tools: [] })));
    expect(ungated.stderr).toMatch(/spec\.approval: Forbidden: spec\.approval cannot change after the run is created/);
    const published = await apply(
      withSpec('immutable', (s) => (s.publish = { branch: 'main', credentialsSecretRef: { name: 'push-token' } })),
    );
    expect(published.stderr).toMatch(/spec\.publish: Forbidden: spec\.publish cannot change after the run is created/);
    const rebudget = await apply(withSpec('immutable', (s) => (s.budget = { maxSteps: 10 })));
    expect(rebudget.stderr).toBe('');
    expect(rebudget.code).toBe(0);
  });
});
