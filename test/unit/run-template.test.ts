// spec.templateRef (#15.3), the pure part: which spec a run naming a CodingRunTemplate runs
// (the template recorded when it was accepted, with the run's own fields laid over it by the
// schedule's merge), when the template is read, and what decide() does with it: the effective
// spec is what is validated (allowRepo included), a missing template refuses the run, and the
// template is recorded in the status write that accepts it.
import { describe, expect, it } from 'vitest';
import type { CodingRun, CodingRunStatus } from '../../operator/src/api/index.ts';
import type { CodingRunTemplate } from '../../operator/src/api/coding-run-template.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { decide } from '../../operator/src/reconcile/decide.ts';
import type { ObservedRun } from '../../operator/src/reconcile/observed-run.ts';
import { effectiveSpecInput, templateToRead, withTemplate } from '../../operator/src/reconcile/run-template.ts';
import { parseSpec } from '../../operator/src/reconcile/validate-run.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';
import { egressRunOf } from '../../operator/src/egress/run-directory.ts';
import { liveRun } from '../../operator/src/workers/live-run.ts';

const config = loadOperatorConfig({ allowRepo: ['https://github.com/acme/*'], maxActiveRuns: 2, allowUnisolatedSandboxes: true }, {});
const now = new Date('2026-11-29T12:00:00Z');

const templateSpec = {
  task: 'Update the dependencies',
  repository: { url: 'https://github.com/acme/webapp.git', revision: 'main', credentialsSecretRef: { name: 'git', key: 'token' } },
  model: { provider: 'openai', name: 'gpt-5.6', apiKeySecretRef: { name: 'llm', key: 'apiKey' } },
  tools: { allow: ['read_file', 'bash'] },
  budget: { maxSteps: 30, timeout: '20m' },
  sandbox: { setup: 'npm ci', egress: { allow: [] } },
};

const template = (spec: Record<string, unknown> = templateSpec, resourceVersion = '41'): CodingRunTemplate => ({
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRunTemplate',
  metadata: { name: 'deps', namespace: 'agents', uid: 'tpl-uid', resourceVersion },
  spec: spec as CodingRunTemplate['spec'],
});

const accepted = [
  { type: 'Accepted' as const, status: 'True' as const, reason: 'Valid', message: 'ok', lastTransitionTime: '2026-11-29T11:59:30Z' },
];

/** A run as stored: only what its author wrote (the CRD fills in no defaults). */
function templatedRun(own: Record<string, unknown> = {}, status?: CodingRunStatus): CodingRun {
  const run = codingRunFixture(status ? { status } : {});
  run.spec = { templateRef: { name: 'deps' }, ...own } as CodingRun['spec'];
  return run;
}

const recorded = (spec: Record<string, unknown> = templateSpec) => ({ name: 'deps', uid: 'tpl-uid', resourceVersion: '41', spec });

describe('effectiveSpecInput', () => {
  it.each<[string, CodingRun, Record<string, unknown>]>([
    [
      'a run without templateRef runs its own spec, unmerged',
      codingRunFixture({ spec: { budget: { maxSteps: 5 } } }),
      { task: 'Fix it', budget: { maxSteps: 5 } },
    ],
    [
      "a run with only templateRef runs the recorded template's spec",
      templatedRun({}, { template: recorded() }),
      { task: 'Update the dependencies', budget: { maxSteps: 30, timeout: '20m' }, tools: { allow: ['read_file', 'bash'] } },
    ],
    [
      "the run's own text replaces the template's; its objects merge field by field",
      templatedRun(
        { task: 'Bump lodash only', budget: { maxSteps: 10 }, repository: { url: templateSpec.repository.url, revision: 'dev' } },
        {
          template: recorded(),
        },
      ),
      {
        task: 'Bump lodash only',
        budget: { maxSteps: 10, timeout: '20m' },
        repository: { url: 'https://github.com/acme/webapp.git', revision: 'dev', credentialsSecretRef: { name: 'git', key: 'token' } },
      },
    ],
    [
      "the run's lists replace the template's whole",
      templatedRun({ tools: { allow: ['grep'] } }, { template: recorded() }),
      { tools: { allow: ['grep'] } },
    ],
  ])('%s', (_, run, expected) => {
    const effective = effectiveSpecInput(run);
    expect(effective.ok).toBe(true);
    expect(effective.ok && effective.spec).toMatchObject(expected);
    // The effective spec is a plain run's: the reference to the template is not part of it.
    expect(effective.ok && 'templateRef' in effective.spec).toBe(false);
  });

  it.each<[string, CodingRun, string, RegExp]>([
    [
      'no template recorded before acceptance: it was not found',
      templatedRun({ task: 'x' }),
      'TemplateNotFound',
      /CodingRunTemplate agents\/deps named in spec.templateRef does not exist: create it in the run's namespace/,
    ],
    [
      'an accepted run whose recorded template is gone never merges with anything else',
      templatedRun({}, { conditions: accepted }),
      'InvalidSpec',
      /status.template no longer holds the CodingRunTemplate deps/,
    ],
    [
      'a recorded template of another name is not the one the run names',
      templatedRun({}, { template: { ...recorded(), name: 'other' } }),
      'TemplateNotFound',
      /CodingRunTemplate agents\/deps/,
    ],
  ])('refuses: %s', (_, run, reason, message) => {
    const effective = effectiveSpecInput(run);
    expect(effective.ok).toBe(false);
    expect(!effective.ok && effective.refusal.reason).toBe(reason);
    expect(!effective.ok && effective.refusal.message).toMatch(message);
  });
});

describe('reading and recording the template', () => {
  it.each<[string, CodingRun, string | undefined]>([
    ['a new run naming a template', templatedRun(), 'deps'],
    ['a run without templateRef', codingRunFixture(), undefined],
    ['a run with the template recorded', templatedRun({}, { template: recorded() }), undefined],
    ['an accepted run', templatedRun({}, { conditions: accepted }), undefined],
    ['a finished run', templatedRun({}, { phase: 'Failed', reason: 'TemplateNotFound' }), undefined],
  ])('templateToRead: %s → %s', (_, run, expected) => {
    expect(templateToRead(run)).toBe(expected);
  });

  it('records the template read for a new run, as it was read (name, uid, resourceVersion, spec)', () => {
    const run = withTemplate(templatedRun(), template());
    expect(run.status?.template).toEqual(recorded());
  });

  it('a template edited after acceptance changes nothing: the recorded one stays, and so does the effective spec', () => {
    const acceptedRun = templatedRun({}, { conditions: accepted, template: recorded() });
    const edited = template({ ...templateSpec, task: 'Delete everything', repository: { url: 'https://github.com/evil/x.git' } }, '99');
    const after = withTemplate(acceptedRun, edited);
    expect(after).toBe(acceptedRun);
    const parsed = parseSpec(after);
    expect(parsed.ok && parsed.spec.task).toBe('Update the dependencies');
    expect(parsed.ok && parsed.spec.repository.url).toBe('https://github.com/acme/webapp.git');
  });

  it('records who last wrote the template (its chamvi.dev/created-by), whom the approval policy keeps from answering', () => {
    const written = { ...template(), metadata: { ...template().metadata, annotations: { 'chamvi.dev/created-by': 'alice' } } };
    expect(withTemplate(templatedRun(), written).status?.template).toEqual({ ...recorded(), writtenBy: 'alice' });
  });

  it('records nothing when the template is missing or is another one', () => {
    expect(withTemplate(templatedRun(), undefined).status?.template).toBeUndefined();
    const other = { ...template(), metadata: { ...template().metadata, name: 'other' } };
    expect(withTemplate(templatedRun(), other).status?.template).toBeUndefined();
  });

  it("parses the effective spec with the run schema's defaults where neither the template nor the run set a field", () => {
    const parsed = parseSpec(withTemplate(templatedRun(), template({ ...templateSpec, tools: undefined, approval: undefined })));
    expect(parsed.ok).toBe(true);
    if (!parsed.ok) return;
    expect(parsed.spec.tools.allow).toHaveLength(12);
    expect(parsed.spec.approval).toEqual({ tools: [], timeout: '24h' });
    expect(parsed.spec.budget).toEqual({ maxSteps: 30, timeout: '20m' });
  });

  it('refuses an effective spec that is not a valid run, naming the template', () => {
    const parsed = parseSpec(withTemplate(templatedRun(), template({ ...templateSpec, task: undefined })));
    expect(parsed.ok).toBe(false);
    expect(!parsed.ok && parsed.refusal).toEqual({
      reason: 'InvalidSpec',
      message: expect.stringMatching(/^spec\.task: .*\(the run's spec laid over CodingRunTemplate deps \(resourceVersion 41\)\)/),
    });
  });
});

describe('decide: a run naming a template', () => {
  const observe = (run: CodingRun, overrides: Partial<ObservedRun> = {}): ObservedRun => ({
    run,
    networkPolicyExists: false,
    ownedConfigMaps: [],
    references: {
      secrets: { llm: ['apiKey'], git: ['token'] },
      configMaps: {},
      secretLabels: { llm: { 'chamvi.dev/usable-by-runs': 'true' }, git: { 'chamvi.dev/usable-by-runs': 'true' } },
    },
    admission: { admit: true, sequence: 1 },
    ...overrides,
  });

  it('accepts it, records the template in the same status write, and says which template in the Accepted Event', () => {
    const decision = decide(observe(withTemplate(templatedRun({ budget: { maxSteps: 10 } }), template())), config, now);
    expect(decision.status?.conditions?.find((c) => c.type === 'Accepted')).toMatchObject({ status: 'True', reason: 'Valid' });
    expect(decision.status?.template).toEqual(recorded());
    expect(decision.status?.phase).toBe('Provisioning');
    expect(decision.events[0]).toMatchObject({
      reason: 'Accepted',
      message: 'Accepted: https://github.com/acme/webapp.git with openai/gpt-5.6, from CodingRunTemplate deps (resourceVersion 41)',
    });
  });

  it.each<[string, CodingRun, string, RegExp]>([
    [
      'its template is missing',
      withTemplate(templatedRun({ task: 'x' }), undefined),
      'TemplateNotFound',
      /CodingRunTemplate agents\/deps named in spec.templateRef does not exist/,
    ],
    [
      "the template's repository is outside allowRepo: the effective spec is what is checked",
      withTemplate(templatedRun(), template({ ...templateSpec, repository: { url: 'https://github.com/evil/x.git' } })),
      'RepoNotAllowed',
      /allowRepo/,
    ],
    [
      "the run's own repository is outside allowRepo, over an allowed template's",
      withTemplate(templatedRun({ repository: { url: 'https://github.com/evil/x.git' } }), template()),
      'RepoNotAllowed',
      /allowRepo/,
    ],
    [
      "a Secret the template names is missing: the template's references are checked too",
      withTemplate(templatedRun(), template()),
      'SecretNotFound',
      /Secret agents\/git named in spec.repository.credentialsSecretRef does not exist/,
    ],
  ])('refuses it when %s', (name, run, reason, message) => {
    const references = name.startsWith('a Secret')
      ? { secrets: { llm: ['apiKey'] }, configMaps: {}, secretLabels: { llm: { 'chamvi.dev/usable-by-runs': 'true' } } }
      : undefined;
    const decision = decide(observe(run, references ? { references } : {}), config, now);
    expect(decision.status).toMatchObject({ phase: 'Failed', reason });
    expect(decision.status?.message).toMatch(message);
    expect(decision.status?.conditions?.find((c) => c.type === 'Accepted')).toMatchObject({ status: 'False', reason });
    expect(decision.actions.map((action) => action.type)).not.toContain('createPod');
  });
});

describe('every reader sees the same effective spec', () => {
  const withEgress = { ...templateSpec, sandbox: { egress: { allow: ['registry.npmjs.org'] } } };
  const running = templatedRun({ budget: { maxSteps: 7 } }, { phase: 'Running', conditions: accepted, template: recorded(withEgress) });

  it("the worker's live run: the recorded template with the run's own fields over it", async () => {
    const live = await liveRun({ getRun: () => Promise.resolve(running) }, { namespace: 'agents', name: 'fix', uid: 'uid-1' });
    expect(live?.spec).toMatchObject({ task: 'Update the dependencies', budget: { maxSteps: 7, timeout: '20m' } });
    expect(live?.spec.tools.allow).toEqual(['read_file', 'bash']);
  });

  // A run given a warm pool pod is accepted (its template recorded) in the write made after its
  // agent is queued: the first job may read it before that write lands.
  it("the worker's live run read before its accepting write: read fresh until the template is there", async () => {
    const before = templatedRun({ budget: { maxSteps: 7 } });
    const fresh = [before, before, running];
    const reads: string[] = [];
    const live = await liveRun(
      {
        getRun: () => (reads.push('remembered'), Promise.resolve(before)),
        getRunFresh: () => (reads.push('fresh'), Promise.resolve(fresh.shift())),
      },
      { namespace: 'agents', name: 'fix', uid: 'uid-1' },
    );
    expect(live?.spec).toMatchObject({ task: 'Update the dependencies', budget: { maxSteps: 7, timeout: '20m' } });
    expect(reads).toEqual(['remembered', 'fresh', 'fresh', 'fresh']);
  });

  it('reads no run again that needs no template, nor one accepted whose template is gone', async () => {
    const reads: string[] = [];
    const deps = (run: CodingRun) => ({
      getRun: () => (reads.push('remembered'), Promise.resolve(run)),
      getRunFresh: () => (reads.push('fresh'), Promise.resolve(run)),
    });
    const ref = { namespace: 'agents', name: 'fix', uid: 'uid-1' };
    expect(await liveRun(deps(codingRunFixture()), ref)).toBeDefined();
    // status.template is the operator's to write: an accepted run without it is refused at once.
    expect(await liveRun(deps(templatedRun({}, { phase: 'Running', conditions: accepted })), ref)).toBeUndefined();
    expect(reads).toEqual(['remembered', 'remembered']);
  });

  it("the egress proxy: the hosts the run's template opens", () => {
    expect(egressRunOf(running)?.allow).toHaveLength(1);
    // Before acceptance nothing is recorded, and the proxy serves nothing.
    expect(egressRunOf(templatedRun({}, { phase: 'Pending' }))).toBeUndefined();
  });
});
