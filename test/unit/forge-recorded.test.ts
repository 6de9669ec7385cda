// The forge contract over the GitHub (Octokit) and GitLab adapters, against a real HTTP server
// replaying recorded exchanges of their APIs: every request body is checked against the
// recording, and a request the recording does not expect fails the suite.
import { expect } from 'vitest';
import { GitHubForge } from '../../operator/src/publish/github-forge.ts';
import { GitLabForge } from '../../operator/src/publish/gitlab-forge.ts';
import type { Forge, ForgeOptions } from '../../operator/src/publish/forge.ts';
import { runForgeContract } from '../support/forge/forge-contract.ts';
import { startRecordedForgeServer, type Recording } from '../support/forge/recorded-forge-server.ts';
import { GITHUB_RECORDING, GITLAB_RECORDING, RECORDED_BRANCH } from '../support/forge/recordings.ts';

const TOKEN = 'glpat-recorded-0123456789abcdef';
const BAD = 'glpat-refused-fedcba9876543210';

function recorded(recording: Recording, make: (options: ForgeOptions) => Forge) {
  return async () => {
    const server = await startRecordedForgeServer(recording, TOKEN);
    const options = { apiURL: server.origin, repository: 'acme/app' };
    return {
      forge: make({ ...options, token: TOKEN }),
      refusedForge: make({ ...options, token: BAD }),
      refusedToken: BAD,
      branch: RECORDED_BRANCH,
      verify() {
        expect(server.mismatches).toEqual([]);
        expect(server.remaining()).toBe(0);
      },
      close: () => server.close(),
    };
  };
}

runForgeContract(
  'GitHub (recorded)',
  recorded(GITHUB_RECORDING, (options) => new GitHubForge(options)),
);
runForgeContract(
  'GitLab (recorded)',
  recorded(GITLAB_RECORDING, (options) => new GitLabForge(options)),
);
