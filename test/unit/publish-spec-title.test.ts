// spec.publish.pullRequest.title is refused when it is accepted, not after the branch is pushed:
// GitLab puts "Draft: " before a draft's title and Gitea "WIP: ", and GitLab refuses a merge
// request title over 255 characters, so a title of 249 to 256 characters (all the schema took)
// failed the publish at the forge with the branch already pushed.
import { describe, expect, it } from 'vitest';
import { codingRunSpec } from '../../operator/src/api/index.ts';
import { buildCodingRunCrd } from '../../operator/src/api/crd.ts';

const base = {
  task: 't',
  repository: { url: 'https://x/y.git', credentialsSecretRef: { name: 's' } },
  model: { provider: 'scripted', scriptRef: { name: 'c' } },
};
const titled = (title: string) => codingRunSpec.safeParse({ ...base, publish: { pullRequest: { title, draft: true } } });

describe('the title of the pull request a run opens', () => {
  it('is at most 248 characters, so that GitLab\'s "Draft: " before it makes at most its 255', () => {
    expect(titled('x'.repeat(248)).success).toBe(true);
    expect(`Draft: ${'x'.repeat(248)}`).toHaveLength(255);
    const refused = titled('x'.repeat(249));
    expect(refused.success).toBe(false);
    expect(refused.error?.issues[0]?.path).toEqual(['publish', 'pullRequest', 'title']);
  });

  it('is bounded the same by the API server', () => {
    const spec = buildCodingRunCrd().spec.versions[0]!.schema.openAPIV3Schema.properties.spec as unknown as {
      properties: { publish: { properties: { pullRequest: { properties: { title: { maxLength: number; description: string } } } } } };
    };
    const title = spec.properties.publish.properties.pullRequest.properties.title;
    expect(title.maxLength).toBe(248);
    expect(title.description).toMatch(/248 characters/);
  });
});
