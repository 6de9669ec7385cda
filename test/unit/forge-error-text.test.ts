// What a forge says when it refuses goes into the run's status.message and an Event, which
// `kubectl describe` and a terminal show: every adapter puts it on one line with no control
// character in it, so a forge (or whoever controls what it echoes) cannot write lines of its own
// choosing there, nor send a terminal escape sequence (ESC [2J clears the screen). The token is
// still cut out. Against a real HTTP server.
import { describe, expect, it } from 'vitest';
import { ForgeError } from '../../operator/src/publish/errors/forge-error.ts';
import type { Forge, ForgeOptions } from '../../operator/src/publish/forge.ts';
import { GiteaForge } from '../../operator/src/publish/gitea-forge.ts';
import { GitHubForge } from '../../operator/src/publish/github-forge.ts';
import { GitLabForge } from '../../operator/src/publish/gitlab-forge.ts';
import { loopbackForges } from '../support/forge/loopback-forges.ts';

const forgeServing = loopbackForges();

/** A forge whose every answer is `status` with `body`. */
const forgeAnswering = (status: number, body: string) =>
  forgeServing((_request, response) => {
    response.writeHead(status, { 'content-type': 'application/json' });
    response.end(body);
  });

const ADAPTERS: Array<[string, (options: ForgeOptions) => Forge]> = [
  ['GitHub', (options) => new GitHubForge(options)],
  ['Gitea', (options) => new GiteaForge(options)],
  ['GitLab', (options) => new GitLabForge(options)],
];
const TOKEN = 'tok-0123456789';

/** C0 controls (a newline, a tab, ESC), DEL and C1 controls (U+009B is an 8-bit CSI). */
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

const refusal = async (build: (options: ForgeOptions) => Forge, status: number, body: string) => {
  const forge = build({ apiURL: await forgeAnswering(status, body), repository: 'acme/app', token: TOKEN });
  const error = await forge.defaultBranch().catch((caught: unknown) => caught);
  expect(ForgeError.isInstance(error)).toBe(true);
  return (error as ForgeError).message;
};

describe.each(ADAPTERS)('the %s adapter, refused with hostile words', (_name, build) => {
  it('says what the forge said on one line, with no control character', async () => {
    const message = await refusal(build, 403, JSON.stringify({ message: 'x\n\u001b[2J Fake: Approved' }));
    expect(message).not.toMatch(CONTROL);
    expect(message).toMatch(/HTTP 403/);
    expect(message).toContain('x [2J Fake: Approved');
  });

  it('leaves no C1 control, tab, carriage return or line separator, and still cuts the token out', async () => {
    const message = await refusal(
      build,
      422,
      JSON.stringify({ message: `bad\r\n\tline\u009b2J\u2028next ${TOKEN}\u0085end`, errors: [{ code: 'x\ny' }] }),
    );
    expect(message).not.toMatch(CONTROL);
    expect(message).not.toMatch(/[\u2028\u2029]/);
    expect(message).not.toContain(TOKEN);
    expect(message).toMatch(/bad line 2J next \[redacted\] end/);
  });
});
