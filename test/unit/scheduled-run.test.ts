// How a schedule's run is made: the merge rules (objects field by field, everything else
// replaced), the same validation as a plain run for the merged spec, and the run object
// (its name for the time, owner, labels that let a restarted operator find it), and that name.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { codingScheduleSpec, type CodingSchedule } from '../../operator/src/api/coding-schedule.ts';
import type { CodingRunTemplate } from '../../operator/src/api/coding-run-template.ts';
import { renderAllCrdYaml } from '../../operator/src/api/crd-yaml.ts';
import { buildCodingScheduleCrd } from '../../operator/src/api/schedule-crds.ts';
import { MAX_RUN_BYTES } from '../../operator/src/reconcile/decide.ts';
import { mergeRunSpec } from '../../operator/src/reconcile/merge-run-spec.ts';
import { MAX_NAME, scheduledRunName } from '../../operator/src/reconcile/names.ts';
import { resolveScheduledRunSpec, scheduledRunObject, toScheduledRun } from '../../operator/src/reconcile/scheduled-run.ts';

const template: CodingRunTemplate = {
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingRunTemplate',
  metadata: { name: 'deps', namespace: 'team-a' },
  spec: {
    repository: { url: 'https://github.com/acme/app.git', revision: 'main' },
    model: { provider: 'openai', name: 'gpt-5.6', apiKeySecretRef: { name: 'llm' } },
    budget: { maxSteps: 40, timeout: '30m' },
    tools: { allow: ['read_file', 'bash'] },
    sandbox: { env: [{ name: 'CI', value: '1' }] },
  },
};

describe('mergeRunSpec', () => {
  it('merges objects field by field and replaces text, numbers and lists whole', () => {
    const merged = mergeRunSpec(template.spec as Record<string, unknown>, {
      task: 'Update dependencies',
      repository: { revision: 'develop' },
      budget: { maxSteps: 80 },
      tools: { allow: ['read_file'] },
      sandbox: { env: [{ name: 'NODE_ENV', value: 'test' }] },
    });
    expect(merged).toEqual({
      task: 'Update dependencies',
      repository: { url: 'https://github.com/acme/app.git', revision: 'develop' },
      model: { provider: 'openai', name: 'gpt-5.6', apiKeySecretRef: { name: 'llm' } },
      budget: { maxSteps: 80, timeout: '30m' },
      tools: { allow: ['read_file'] },
      sandbox: { env: [{ name: 'NODE_ENV', value: 'test' }] },
    });
  });

  it('leaves the template untouched', () => {
    const before = JSON.stringify(template.spec);
    mergeRunSpec(template.spec as Record<string, unknown>, { budget: { maxSteps: 1 } });
    expect(JSON.stringify(template.spec)).toBe(before);
  });
});

const schedule = (spec: object) => codingScheduleSpec.parse({ schedule: '0 3 * * *', ...spec });

describe('resolveScheduledRunSpec', () => {
  it('gives the merged spec when it is a valid run spec', () => {
    const resolved = resolveScheduledRunSpec(
      schedule({ templateRef: { name: 'deps' }, runTemplate: { spec: { task: 'Update' } } }),
      template,
    );
    expect(resolved).toMatchObject({ ok: true, spec: { task: 'Update', repository: { revision: 'main' } } });
  });

  it('says TemplateNotFound when the named template does not exist', () => {
    const resolved = resolveScheduledRunSpec(
      schedule({ templateRef: { name: 'deps' }, runTemplate: { spec: { task: 'Update' } } }),
      undefined,
    );
    expect(resolved).toMatchObject({
      ok: false,
      problem: { reason: 'TemplateNotFound', message: expect.stringContaining('deps') as string },
    });
  });

  it('refuses a merged spec a plain run would be refused for (missing task)', () => {
    const resolved = resolveScheduledRunSpec(schedule({ templateRef: { name: 'deps' } }), template);
    expect(resolved).toMatchObject({
      ok: false,
      problem: { reason: 'InvalidRunSpec', message: expect.stringContaining('spec.task') as string },
    });
  });

  it('refuses a merged spec that breaks a cross-field rule (baseURL without openai-compatible)', () => {
    const resolved = resolveScheduledRunSpec(
      schedule({ templateRef: { name: 'deps' }, runTemplate: { spec: { task: 'Update', model: { baseURL: 'https://llm.internal/v1' } } } }),
      template,
    );
    expect(resolved).toMatchObject({
      ok: false,
      problem: { reason: 'InvalidRunSpec', message: expect.stringContaining('baseURL may only be set') as string },
    });
  });

  it('refuses an override with a value out of bounds', () => {
    const resolved = resolveScheduledRunSpec(
      schedule({ templateRef: { name: 'deps' }, runTemplate: { spec: { task: 'Update', budget: { maxSteps: 5000 } } } }),
      template,
    );
    expect(resolved).toMatchObject({
      ok: false,
      problem: { reason: 'InvalidRunSpec', message: expect.stringContaining('spec.budget.maxSteps') as string },
    });
  });
});

describe('resolveScheduledRunSpec: the size of the merged run', () => {
  // Each source under the limit (the API server took both), the merge over it: the run
  // reconciler would refuse the run, and past etcd's 1.5 MiB the API server could not store it.
  const big: CodingRunTemplate = {
    ...template,
    spec: {
      ...template.spec,
      sandbox: { env: Array.from({ length: 20 }, (_, index) => ({ name: `V${index}`, value: 'a'.repeat(32_768) })) },
    },
  };

  // 100 000 characters each (the schema's most), 3 bytes each in UTF-8.
  const text = '\u6f22'.repeat(100_000);

  it('refuses a merged run over MAX_RUN_BYTES as InvalidRunSpec, naming the largest fields to shorten', () => {
    const spec = schedule({ templateRef: { name: 'big' }, runTemplate: { spec: { task: text, instructions: text } } });
    expect(Buffer.byteLength(JSON.stringify(big))).toBeLessThan(MAX_RUN_BYTES);
    expect(Buffer.byteLength(JSON.stringify(spec))).toBeLessThan(MAX_RUN_BYTES);
    const resolved = resolveScheduledRunSpec(spec, big);
    expect(resolved).toMatchObject({ ok: false, problem: { reason: 'InvalidRunSpec' } });
    const { message } = (resolved as { problem: { message: string } }).problem;
    expect(message).toMatch(
      /^CodingRunTemplate big with spec\.runTemplate\.spec makes a run of 12\d\d KiB as the API server stores it, over the 1024 KiB a run may be/,
    );
    expect(message).toMatch(/the largest fields: spec\.sandbox \(6\d\d KiB\), spec\.task \(293 KiB\), spec\.instructions \(293 KiB\)/);
  });

  it('counts the labels and annotations the run carries', () => {
    const annotations = { note: 'n'.repeat(65_536), more: 'n'.repeat(65_536) };
    const without = schedule({ templateRef: { name: 'big' }, runTemplate: { spec: { task: text } } });
    expect(resolveScheduledRunSpec(without, big).ok).toBe(true);
    const spec = schedule({ templateRef: { name: 'big' }, runTemplate: { metadata: { annotations }, spec: { task: text } } });
    expect(resolveScheduledRunSpec(spec, big)).toMatchObject({
      ok: false,
      problem: { reason: 'InvalidRunSpec', message: expect.stringContaining('spec.runTemplate.metadata.annotations (129 KiB)') as string },
    });
  });
});

describe('scheduledRunObject', () => {
  const owner: CodingSchedule = {
    apiVersion: 'chamvi.dev/v1alpha1',
    kind: 'CodingSchedule',
    metadata: { name: 'nightly', namespace: 'team-a', uid: 'uid-1' },
    spec: { schedule: '0 3 * * *' },
  };

  it('is named for the schedule and the time, owned by it and labelled with the schedule and the scheduled time', () => {
    const spec = schedule({ templateRef: { name: 'deps' }, runTemplate: { metadata: { labels: { team: 'a' } }, spec: { task: 'x' } } });
    const object = scheduledRunObject(owner, spec, { task: 'x' } as never, new Date('2026-06-01T03:00:00Z'));
    // Minutes since the epoch, as CronJob names its Jobs: 1780282800 s / 60.
    expect(object.metadata.name).toBe('nightly-29671380');
    expect(object.metadata).not.toHaveProperty('generateName');
    expect(object.metadata.labels).toEqual({ team: 'a', 'chamvi.dev/schedule': 'nightly', 'chamvi.dev/scheduled-time': '1780282800' });
    expect(object.metadata.annotations['chamvi.dev/scheduled-at']).toBe('2026-06-01T03:00:00.000Z');
    expect(object.metadata.ownerReferences).toEqual([
      { apiVersion: 'chamvi.dev/v1alpha1', kind: 'CodingSchedule', name: 'nightly', uid: 'uid-1', controller: true },
    ]);
  });

  it("names the schedule's recorded writer as the run's creator, never one its run template names", () => {
    // Separation of duties: the policy checks the schedule's created-by; the template's is the author's word.
    const posing = schedule({
      templateRef: { name: 'deps' },
      runTemplate: { metadata: { annotations: { 'chamvi.dev/created-by': 'bob', note: 'kept' } }, spec: { task: 'x' } },
    });
    const written = { ...owner, metadata: { ...owner.metadata, annotations: { 'chamvi.dev/created-by': 'alice' } } };
    const at = new Date('2026-06-01T03:00:00Z');
    expect(scheduledRunObject(written, posing, { task: 'x' } as never, at).metadata.annotations).toEqual({
      note: 'kept',
      'chamvi.dev/created-by': 'alice',
      'chamvi.dev/scheduled-at': '2026-06-01T03:00:00.000Z',
    });
    expect(scheduledRunObject(owner, posing, { task: 'x' } as never, at).metadata.annotations).toEqual({
      note: 'kept',
      'chamvi.dev/scheduled-at': '2026-06-01T03:00:00.000Z',
    });
  });

  it('copies no approval, approver or cancel from the run template: a run is answered only once it waits', () => {
    // Copied, one approval in the schedule answered s1-c1 of every run it made, in a name its author chose.
    const answering = schedule({
      templateRef: { name: 'deps' },
      runTemplate: {
        metadata: {
          annotations: {
            'chamvi.dev/approval':
              '{"id":"s1-c1","decision":"approve","sha256":"0000000000000000000000000000000000000000000000000000000000000000"}',
            'chamvi.dev/approver': 'bob',
            'chamvi.dev/cancel': '{"reason":"x"}',
            note: 'kept',
          },
        },
        spec: { task: 'x' },
      },
    });
    const at = new Date('2026-06-01T03:00:00Z');
    expect(scheduledRunObject(owner, answering, { task: 'x' } as never, at).metadata.annotations).toEqual({
      note: 'kept',
      'chamvi.dev/scheduled-at': '2026-06-01T03:00:00.000Z',
    });
  });

  it("names the template's recorded writer too, never one the schedule's run template names", () => {
    // Separation of duties: whoever wrote the template wrote the run's task as much as the schedule's writer.
    const posing = schedule({
      templateRef: { name: 'deps' },
      runTemplate: { metadata: { annotations: { 'chamvi.dev/template-written-by': 'nobody' } }, spec: { task: 'x' } },
    });
    const written = { ...template, metadata: { ...template.metadata, annotations: { 'chamvi.dev/created-by': 'carol' } } };
    const at = new Date('2026-06-01T03:00:00Z');
    expect(scheduledRunObject(owner, posing, { task: 'x' } as never, at, written).metadata.annotations).toEqual({
      'chamvi.dev/template-written-by': 'carol',
      'chamvi.dev/scheduled-at': '2026-06-01T03:00:00.000Z',
    });
    // A template that names no writer (separation of duties off), or a schedule without templateRef: none.
    const inline = schedule({ runTemplate: { spec: { ...template.spec, task: 'x' } } });
    expect(scheduledRunObject(owner, posing, { task: 'x' } as never, at, template).metadata.annotations).not.toHaveProperty(
      'chamvi.dev/template-written-by',
    );
    expect(scheduledRunObject(owner, inline, { task: 'x' } as never, at, written).metadata.annotations).not.toHaveProperty(
      'chamvi.dev/template-written-by',
    );
  });
});

describe('CodingSchedule and CodingRunTemplate CRDs', () => {
  it.each(Object.entries(renderAllCrdYaml()))(
    'crds/%s matches the committed file (run `make crds chart-sync` when this fails)',
    (file, text) => {
      expect(readFileSync(new URL(`../../crds/${file}`, import.meta.url), 'utf8')).toBe(text);
      expect(readFileSync(new URL(`../../charts/chamvi-operator/files/crd/${file}`, import.meta.url), 'utf8')).toBe(text);
    },
  );

  it('takes runTemplate.spec as an override: no defaults and no required fields that would hide the template', () => {
    const spec = (buildCodingScheduleCrd().spec.versions[0]!.schema.openAPIV3Schema.properties as Record<string, unknown>).spec as {
      properties: {
        runTemplate: {
          properties: { spec: { required?: string[]; properties: Record<string, { default?: unknown; required?: string[] }> } };
        };
      };
    };
    const overrides = spec.properties.runTemplate.properties.spec;
    expect(overrides.required).toBeUndefined();
    expect(overrides.properties.budget?.default).toBeUndefined();
    expect(overrides.properties.model?.required).toBeUndefined();
    expect(Object.keys(overrides.properties)).toEqual(expect.arrayContaining(['task', 'repository', 'model', 'budget', 'sandbox']));
  });
});

describe('toScheduledRun', () => {
  const run = (label: string) =>
    ({
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: { name: 'nightly-x', namespace: 'team', uid: 'u', labels: { 'chamvi.dev/scheduled-time': label } },
      spec: {},
      status: { phase: 'Succeeded', completionTime: '2026-12-05T01:00:00Z' },
    }) as unknown as Parameters<typeof toScheduledRun>[0];

  it('reads the scheduled time from its label', () => {
    expect(toScheduledRun(run('1764896400'))).toEqual([
      {
        name: 'nightly-x',
        scheduledTime: new Date(1764896400 * 1000),
        phase: 'Succeeded',
        completionTime: new Date('2026-12-05T01:00:00Z'),
      },
    ]);
  });

  // Past 9999 toISOString writes a 6-digit year the API server's date-time refuses: listed in
  // status.active, it made every status write a 422.
  it.each(['', 'soon', '9999999999999', '253402300800'])(
    'counts no run whose label %j is not a time the status can hold (past the years 275760 and 9999 included)',
    (label) => {
      expect(toScheduledRun(run(label))).toEqual([]);
    },
  );

  it('counts a run labelled for the last second of 9999', () => {
    expect(toScheduledRun(run('253402300799')).map((scheduled) => scheduled.scheduledTime.toISOString())).toEqual([
      '9999-12-31T23:59:59.000Z',
    ]);
  });
});

// One name per scheduled time, so a create sent twice for a time makes one run (the second is
// refused AlreadyExists); a DNS subdomain within the 63 characters a run's objects take its name in.
describe('scheduledRunName', () => {
  const dnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
  const at = new Date('2026-06-01T03:00:00Z');

  it('is the schedule name and the minutes since the epoch, the same for the same time and another for another', () => {
    expect(scheduledRunName('nightly', at)).toBe('nightly-29671380');
    expect(scheduledRunName('nightly', new Date(at.getTime()))).toBe(scheduledRunName('nightly', at));
    expect(scheduledRunName('nightly', new Date(at.getTime() + 60_000))).toBe('nightly-29671381');
    expect(scheduledRunName('nightly.deps', at)).toBe('nightly.deps-29671380');
  });

  it('keeps a name that fits whole: 54 characters and the minutes make 63', () => {
    const name = 'a'.repeat(54);
    expect(scheduledRunName(name, at)).toBe(`${name}-29671380`);
    expect(scheduledRunName(name, at)).toHaveLength(MAX_NAME);
  });

  it('cuts a longer schedule name and adds a hash of the whole name: within 63, and two schedules sharing the cut differ', () => {
    const first = `${'a'.repeat(60)}-one`;
    const second = `${'a'.repeat(60)}-two`;
    const named = scheduledRunName(first, at);
    expect(named).toMatch(/^a{37}-[0-9a-f]{16}-29671380$/);
    expect(named.length).toBeLessThanOrEqual(MAX_NAME);
    expect(scheduledRunName(second, at)).not.toBe(named);
    expect(scheduledRunName(second, at).slice(0, 37)).toBe(named.slice(0, 37));
    expect(scheduledRunName(first, at)).toBe(named);
    expect(scheduledRunName('x'.repeat(253), at).length).toBeLessThanOrEqual(MAX_NAME);
  });

  it('makes a name the API server takes when the cut of a long schedule name ends in a dot or a dash', () => {
    // A run's name is a DNS subdomain: `a.-…` is not one, and every run of the schedule would be refused.
    for (const name of [
      `${'a'.repeat(36)}.bbbbbbbbbbbbbbbbbbbb`,
      `${'a'.repeat(35)}-.cccccccccccccccccccc`,
      `${'a'.repeat(36)}-dddddddddddddddddddddd`,
    ]) {
      const named = scheduledRunName(name, at);
      expect(named).toMatch(dnsSubdomain);
      expect(named).toMatch(new RegExp(`^a{${name[35] === '-' ? 35 : 36}}-[0-9a-f]{16}-29671380$`));
    }
  });
});
