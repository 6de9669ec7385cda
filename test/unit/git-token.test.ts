// A git token is any key of a Secret offered to runs that the run author names
// (spec.repository.credentialsSecretRef, spec.publish.credentialsSecretRef): a binary keystore
// among them. A value with a NUL made node refuse to start git with the value quoted in its
// error, which became the run's status (CloneFailed, AgentFailed, PublishFailed), its Event, its
// log line and its transcript. Each worker that reads the token (the prepare job, the restore of
// protected paths, the publish job) now refuses a key that holds no token before git runs,
// naming the Secret, the key and the field, never the value. The dependencies are in-memory
// recorders; the launcher records every process, and none may start.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { ParsedCodingRun } from '../../operator/src/api/index.ts';
import { RunFailure } from '../../operator/src/api/run-failure.ts';
import type { Sandbox } from '../../operator/src/sandbox/sandbox.ts';
import type { AgentDependencies } from '../../operator/src/workers/agent-dependencies.ts';
import { InvalidGitTokenError } from '../../operator/src/workers/errors/invalid-git-token-error.ts';
import { readGitToken } from '../../operator/src/workers/git-token.ts';
import { launchHere, type Launch } from '../../operator/src/workers/process-launcher.ts';
import { runPublishJob } from '../../operator/src/workers/publish-job.ts';
import { restoreProtected } from '../../operator/src/workers/restore-protected.ts';
import { runAgentJob } from '../../operator/src/workers/run-agent-job.ts';
import type { RunState } from '../../operator/src/workers/run-state.ts';
import { gitRepository, prepareJobHarness } from '../support/prepare-job-harness.ts';

const CANARY = 'CANARY-KEY-MATERIAL-7f3a';
/** What a binary keystore read as UTF-8 looks like: a NUL among the bytes. */
const KEYSTORE = `PKCS12-ish\0${CANARY}`;

const scratch = mkdtempSync(join(tmpdir(), 'git-token-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** launchHere, recording each command it starts. */
function recording(): { launch: Launch; launched: string[] } {
  const launched: string[] = [];
  return { launched, launch: (command, args, options) => (launched.push(command), launchHere(command, args, options)) };
}

const secretHolding = (value: string | undefined) => ({ secretValue: async () => value });

describe('readGitToken', () => {
  it.each([
    ['a NUL (a binary keystore)', KEYSTORE],
    ['a line break (a PEM key)', `-----BEGIN PRIVATE KEY-----\n${CANARY}\n-----END PRIVATE KEY-----`],
    ['a space (a credentials file)', `token ${CANARY}`],
    ['a control character', `${CANARY}\u0007`],
    ['a character past ASCII', `${CANARY}\u00e9`],
    ['more than 4096 characters', CANARY.repeat(200)],
    ['nothing', ''],
  ])('refuses a key holding %s InvalidSpec, naming the Secret, the key and the field, never the value', async (_, value) => {
    const refused = await readGitToken(secretHolding(value), 'ns', {
      name: 'keystore',
      key: 'store.p12',
      field: 'spec.repository.credentialsSecretRef',
    }).catch((error: unknown) => error);
    expect(InvalidGitTokenError.isInstance(refused)).toBe(true);
    expect(RunFailure.isInstance(refused) && refused.reason).toBe('InvalidSpec');
    expect((refused as Error).message).toMatch(
      /^Secret ns\/keystore key "store\.p12" named in spec\.repository\.credentialsSecretRef does not hold a git token: it must be one line of printable ASCII/,
    );
    expect((refused as Error).message).not.toContain(CANARY);
  });

  it('gives a token without the newline a Secret made from a file ends in, and nothing for a missing key (the control)', async () => {
    const reference = { name: 'git', key: 'token', field: 'spec.repository.credentialsSecretRef' };
    await expect(readGitToken(secretHolding('ghp_0123456789abcdef\n'), 'ns', reference)).resolves.toBe('ghp_0123456789abcdef');
    await expect(readGitToken(secretHolding('x'.repeat(4096)), 'ns', reference)).resolves.toHaveLength(4096);
    await expect(readGitToken(secretHolding(undefined), 'ns', reference)).resolves.toBeUndefined();
  });
});

describe('a git token Secret whose key holds no token', () => {
  it('fails the prepare job InvalidSpec before any git runs, naming the Secret and key, with the value in no status', async () => {
    const url = `file://${gitRepository(join(scratch, 'prepare'))}`;
    const { deps, seen } = prepareJobHarness(url, [`file://${scratch}/**`]);
    const { launch, launched } = recording();
    Object.assign(deps, { launch, resources: secretHolding(KEYSTORE) });
    await runAgentJob(deps, { name: 'prepare', data: { uid: 'uid-1', namespace: 'ns', name: 'r' }, attempt: 1, attempts: 10 });
    expect(seen.statuses).toHaveLength(1);
    expect(seen.statuses[0]).toMatchObject({ phase: 'Failed', reason: 'InvalidSpec' });
    expect(seen.statuses[0]!.message).toContain(
      'Secret ns/git key "token" named in spec.repository.credentialsSecretRef does not hold a git token',
    );
    expect(JSON.stringify(seen.statuses)).not.toContain(CANARY);
    expect(launched).toEqual([]);
  });

  it('refuses the clone that restores spec.verify.protect paths the same way, before any git runs', async () => {
    const { launch, launched } = recording();
    const run = {
      metadata: { name: 'r', namespace: 'ns', uid: 'uid-1' },
      spec: {
        repository: { url: `file://${scratch}/repo`, credentialsSecretRef: { name: 'git', key: 'token' } },
        verify: { protect: ['tests/**'] },
      },
    } as unknown as ParsedCodingRun;
    const deps = {
      clonePolicy: { allowRepo: [`file://${scratch}/**`], maxCheckoutBytes: 1 << 30, maxCheckoutFiles: 1_000 },
      resources: secretHolding(KEYSTORE),
      launch,
    } as unknown as Parameters<typeof restoreProtected>[0];
    const refused = await restoreProtected(deps, run, 'HEAD', {} as Sandbox, 45_000).catch((error: unknown) => error);
    expect(RunFailure.isInstance(refused) && refused.reason).toBe('InvalidSpec');
    expect((refused as Error).message).toContain('Secret ns/git key "token" named in spec.repository.credentialsSecretRef');
    expect((refused as Error).message).not.toContain(CANARY);
    expect(launched).toEqual([]);
  });

  it.each([
    ['its own push token', 'spec.publish.credentialsSecretRef', { credentialsSecretRef: { name: 'push', key: 'token' } }, 'push'],
    ["the repository's token it falls back to", 'spec.repository.credentialsSecretRef', {}, 'git'],
  ])('fails the publish job PublishFailed when %s holds no token, naming it, before any git runs', async (_, field, publish, secret) => {
    const { launch, launched } = recording();
    const run = {
      apiVersion: 'chamvi.dev/v1alpha1',
      kind: 'CodingRun',
      metadata: { name: 'r', namespace: 'ns', uid: 'uid-1', generation: 1 },
      spec: {
        task: 'Fix it',
        repository: { url: `file://${scratch}/repo`, credentialsSecretRef: { name: 'git', key: 'token' } },
        model: { provider: 'scripted', scriptRef: { name: 'script' } },
        publish,
      },
      status: { phase: 'Running' },
    };
    const read: string[] = [];
    const state = { uid: 'uid-1', namespace: 'ns', name: 'r', stage: 'publishing', publish: { diffSha256: 'a'.repeat(64) } };
    const deps = {
      states: { load: async () => state as unknown as RunState },
      getRun: async () => run,
      clonePolicy: { allowRepo: [`file://${scratch}/**`], maxCheckoutBytes: 1 << 30, maxCheckoutFiles: 1_000 },
      resources: {
        secretValue: async (_namespace: string, name: string) => {
          read.push(name);
          return KEYSTORE;
        },
      },
      launch,
    } as unknown as AgentDependencies;
    const refused = await runPublishJob(deps, { uid: 'uid-1', namespace: 'ns', name: 'r' }).catch((error: unknown) => error);
    expect(RunFailure.isInstance(refused) && refused.reason).toBe('PublishFailed');
    expect((refused as Error).message).toBe(
      `Publishing failed: Secret ns/${secret} key "token" named in ${field} does not hold a git token: ` +
        'it must be one line of printable ASCII without spaces, at most 4096 characters; put only the token in that key, or name a key that holds one',
    );
    expect(read).toEqual([secret]);
    expect(launched).toEqual([]);
  });
});
