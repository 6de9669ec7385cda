// The one suite every Forge adapter passes (the hono pattern, like sandbox-contract.ts): Gitea
// against a live server, GitHub and GitLab against recorded exchanges of their APIs. It walks
// the life publishing needs, in a fixed order (the recordings follow it): the default branch,
// no pull request yet, one opened with a label, found, updated, found updated; and a bad token
// refused with the forge's words and never the token.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ForgeError } from '../../../operator/src/publish/errors/forge-error.ts';
import type { Forge } from '../../../operator/src/publish/forge.ts';

export interface ForgeHarness {
  forge: Forge;
  /** The same adapter with a token the forge refuses. */
  refusedForge: Forge;
  refusedToken: string;
  /**
   * A branch with a change against main, for the pull request. Where the forge can have one (not
   * GitHub, whose query names the owner), an open pull request from a fork's branch of the same
   * name is there from the start: the adapter must never take it for the branch's own.
   */
  branch: string;
  /** After the suite: what the harness checks of the requests (recorded: all asked, none unexpected). */
  verify?(): void;
  close(): Promise<void>;
}

/** Title and bodies the recordings hold too. */
export const CONTRACT_PULL_REQUEST = {
  title: 'Fix the login bug',
  body: 'Fixed the expiry check.\n\n---\nMade by CodingRun `agents/fix` (chamvi-operator).',
  updatedBody: 'Fixed the expiry check, and its test.\n\n---\nMade by CodingRun `agents/fix` (chamvi-operator).',
  label: 'chamvi',
};

export function runForgeContract(name: string, setup: () => Promise<ForgeHarness>, timeoutMs = 30_000): void {
  describe(`Forge contract: ${name}`, () => {
    let harness: ForgeHarness;
    let opened: { number: number; url: string } | undefined;

    beforeAll(async () => {
      harness = await setup();
    }, 600_000);
    afterAll(async () => {
      await harness?.close();
    });

    it(
      'names the default branch',
      async () => {
        expect(await harness.forge.defaultBranch()).toBe('main');
      },
      timeoutMs,
    );

    it(
      "finds no pull request for a branch that has none of its own (a fork's from a branch of that name is not it)",
      async () => {
        expect(await harness.forge.findOpenPullRequest(harness.branch, 'main')).toBeUndefined();
      },
      timeoutMs,
    );

    it(
      'opens a pull request and returns its number and web address',
      async () => {
        const pr = await harness.forge.createPullRequest({
          branch: harness.branch,
          base: 'main',
          title: CONTRACT_PULL_REQUEST.title,
          body: CONTRACT_PULL_REQUEST.body,
          draft: false,
          labels: [CONTRACT_PULL_REQUEST.label],
        });
        expect(pr.number).toBeGreaterThan(0);
        expect(pr.url).toMatch(/^https?:\/\/.+\/(pull|pulls|merge_requests)\/[0-9]+$/);
        expect(pr).toMatchObject({ title: CONTRACT_PULL_REQUEST.title, body: CONTRACT_PULL_REQUEST.body });
        opened = pr;
      },
      timeoutMs,
    );

    it(
      'finds the open pull request of the branch, as opened',
      async () => {
        const found = await harness.forge.findOpenPullRequest(harness.branch, 'main');
        expect(found).toEqual({
          number: opened!.number,
          url: opened!.url,
          title: CONTRACT_PULL_REQUEST.title,
          body: CONTRACT_PULL_REQUEST.body,
        });
      },
      timeoutMs,
    );

    it(
      'updates its body, and finds it updated',
      async () => {
        const updated = await harness.forge.updatePullRequest(opened!.number, {
          title: CONTRACT_PULL_REQUEST.title,
          body: CONTRACT_PULL_REQUEST.updatedBody,
          draft: false,
        });
        expect(updated).toMatchObject({ number: opened!.number, body: CONTRACT_PULL_REQUEST.updatedBody });
        expect(await harness.forge.findOpenPullRequest(harness.branch, 'main')).toMatchObject({
          number: opened!.number,
          body: CONTRACT_PULL_REQUEST.updatedBody,
        });
      },
      timeoutMs,
    );

    it(
      'refuses a bad token with a ForgeError that carries the status and never the token',
      async () => {
        const error = await harness.refusedForge.defaultBranch().then(
          () => undefined,
          (caught: unknown) => caught,
        );
        expect(ForgeError.isInstance(error)).toBe(true);
        expect((error as ForgeError).status).toBe(401);
        expect((error as ForgeError).message).not.toContain(harness.refusedToken);
      },
      timeoutMs,
    );

    it('sent exactly the requests the forge expects', () => {
      harness.verify?.();
    });
  });
}
