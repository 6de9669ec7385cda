// The forge contract over the Gitea adapter against a real Gitea (built from its Go module by
// test/support/forge/build-gitea.sh, run on loopback): what the operator uses for Gitea and
// Forgejo is exercised on the real API, labels looked up by name included.
import { GiteaForge } from '../../operator/src/publish/gitea-forge.ts';
import { runForgeContract } from '../support/forge/forge-contract.ts';
import { CONTRACT_PULL_REQUEST } from '../support/forge/forge-contract.ts';
import { startGitea } from '../support/forge/gitea-server.ts';

const BAD = 'f'.repeat(40);

runForgeContract(
  'Gitea (live)',
  async () => {
    const gitea = await startGitea();
    await gitea.createRepository('contract');
    const repo = `/repos/${gitea.user}/contract`;
    await gitea.api('POST', `${repo}/labels`, { name: CONTRACT_PULL_REQUEST.label, color: '#f29513' });
    await gitea.api('POST', `${repo}/contents/change.txt`, {
      content: Buffer.from('a change\n').toString('base64'),
      message: 'A change',
      branch: 'main',
      new_branch: 'chamvi/fix',
    });
    // Anyone may fork and open a pull request from a branch named as the run's: a fork in an
    // organisation, with chamvi/fix of its own, asks to merge into main before the suite starts.
    await gitea.api('POST', '/orgs', { username: 'forkers', visibility: 'public' });
    await gitea.api('POST', `${repo}/forks`, { organization: 'forkers' });
    // The fork has chamvi/fix from its parent; one more commit there makes its change its own.
    await gitea.api('POST', '/repos/forkers/contract/contents/fork.txt', {
      content: Buffer.from('from a fork\n').toString('base64'),
      message: 'A fork change',
      branch: 'chamvi/fix',
    });
    await gitea.api('POST', `${repo}/pulls`, { head: 'forkers:chamvi/fix', base: 'main', title: 'From a fork', body: 'From a fork.' });
    const options = { apiURL: `${gitea.origin}/api/v1`, repository: `${gitea.user}/contract` };
    return {
      forge: new GiteaForge({ ...options, token: gitea.token }),
      refusedForge: new GiteaForge({ ...options, token: BAD }),
      refusedToken: BAD,
      branch: 'chamvi/fix',
      close: () => gitea.close(),
    };
  },
  60_000,
);
