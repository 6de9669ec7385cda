// Recorded exchanges of the GitHub REST API and the GitLab REST API v4 for the forge contract
// (forge-contract.ts), in its order. The shapes (paths, query parameters, request bodies,
// answers with the fields an adapter reads, and the 401 bodies) follow the forges' own API
// documentation: GitHub "Pulls" and "Issues > Labels", GitLab "Merge requests" and "Projects".
import { CONTRACT_PULL_REQUEST as PR } from './forge-contract.ts';
import type { Recording } from './recorded-forge-server.ts';

export const RECORDED_BRANCH = 'chamvi/fix';

/** acme/app as a pull request names its head's and base's repository (GitHub's "repository" shape, in part). */
const GITHUB_REPOSITORY = { id: 1296269, name: 'app', full_name: 'acme/app', private: false };

const githubPull = (body: string) => ({
  url: 'https://api.github.com/repos/acme/app/pulls/1347',
  id: 1,
  node_id: 'MDExOlB1bGxSZXF1ZXN0MQ==',
  html_url: 'https://github.com/acme/app/pull/1347',
  number: 1347,
  state: 'open',
  locked: false,
  title: PR.title,
  body,
  draft: false,
  head: {
    label: `acme:${RECORDED_BRANCH}`,
    ref: RECORDED_BRANCH,
    sha: '6dcb09b5b57875f334f61aebed695e2e4193db5e',
    repo: GITHUB_REPOSITORY,
  },
  base: { label: 'acme:main', ref: 'main', sha: '6dcb09b5b57875f334f61aebed695e2e4193db5f', repo: GITHUB_REPOSITORY },
  labels: [{ id: 208045946, name: PR.label }],
});

export const GITHUB_RECORDING: Recording = {
  // Octokit sends a personal access token as "token <t>" (a JWT as "bearer").
  credential: (token) => ({ header: 'authorization', value: new RegExp(`^(token|bearer) ${token}$`, 'i') }),
  unauthorized: { status: 401, response: { message: 'Bad credentials', documentation_url: 'https://docs.github.com/rest', status: '401' } },
  exchanges: [
    {
      method: 'GET',
      path: '/repos/acme/app',
      status: 200,
      response: { id: 1296269, name: 'app', full_name: 'acme/app', private: false, default_branch: 'main' },
    },
    {
      method: 'GET',
      path: '/repos/acme/app/pulls',
      query: { state: 'open', head: `acme:${RECORDED_BRANCH}`, base: 'main' },
      status: 200,
      response: [],
    },
    {
      method: 'POST',
      path: '/repos/acme/app/pulls',
      body: { head: RECORDED_BRANCH, base: 'main', title: PR.title, body: PR.body, draft: false },
      status: 201,
      response: githubPull(PR.body),
    },
    {
      method: 'POST',
      path: '/repos/acme/app/issues/1347/labels',
      body: { labels: [PR.label] },
      status: 200,
      response: [{ id: 208045946, node_id: 'MDU6TGFiZWwyMDgwNDU5NDY=', name: PR.label, color: 'f29513', default: false }],
    },
    {
      method: 'GET',
      path: '/repos/acme/app/pulls',
      query: { state: 'open', head: `acme:${RECORDED_BRANCH}`, base: 'main' },
      status: 200,
      response: [githubPull(PR.body)],
    },
    {
      method: 'PATCH',
      path: '/repos/acme/app/pulls/1347',
      body: { title: PR.title, body: PR.updatedBody },
      status: 200,
      response: githubPull(PR.updatedBody),
    },
    {
      method: 'GET',
      path: '/repos/acme/app/pulls',
      query: { state: 'open', head: `acme:${RECORDED_BRANCH}`, base: 'main' },
      status: 200,
      response: [githubPull(PR.updatedBody)],
    },
  ],
};

const mergeRequest = (description: string) => ({
  id: 92,
  iid: 1,
  project_id: 3,
  source_project_id: 3,
  target_project_id: 3,
  title: PR.title,
  description,
  state: 'opened',
  draft: false,
  source_branch: RECORDED_BRANCH,
  target_branch: 'main',
  labels: [PR.label],
  web_url: 'https://gitlab.example.com/acme/app/-/merge_requests/1',
});

const MR_QUERY = { state: 'opened', source_branch: RECORDED_BRANCH, target_branch: 'main', per_page: '100', page: '1' };

/** A merge request into acme/app from a fork's branch of the same name, listed with the project's own. */
const FORK_MERGE_REQUEST = {
  id: 95,
  iid: 7,
  project_id: 3,
  source_project_id: 41,
  target_project_id: 3,
  title: 'Fix the login bug',
  description: 'From a fork.',
  state: 'opened',
  draft: false,
  source_branch: RECORDED_BRANCH,
  target_branch: 'main',
  labels: [],
  web_url: 'https://gitlab.example.com/acme/app/-/merge_requests/7',
};

export const GITLAB_RECORDING: Recording = {
  credential: (token) => ({ header: 'private-token', value: new RegExp(`^${token}$`) }),
  unauthorized: { status: 401, response: { message: '401 Unauthorized' } },
  exchanges: [
    {
      method: 'GET',
      path: '/projects/acme%2Fapp',
      status: 200,
      response: { id: 3, path_with_namespace: 'acme/app', default_branch: 'main', web_url: 'https://gitlab.example.com/acme/app' },
    },
    { method: 'GET', path: '/projects/acme%2Fapp/merge_requests', query: MR_QUERY, status: 200, response: [FORK_MERGE_REQUEST] },
    {
      method: 'POST',
      path: '/projects/acme%2Fapp/merge_requests',
      body: { source_branch: RECORDED_BRANCH, target_branch: 'main', title: PR.title, description: PR.body, labels: PR.label },
      status: 201,
      response: mergeRequest(PR.body),
    },
    {
      method: 'GET',
      path: '/projects/acme%2Fapp/merge_requests',
      query: MR_QUERY,
      status: 200,
      response: [FORK_MERGE_REQUEST, mergeRequest(PR.body)],
    },
    {
      method: 'PUT',
      path: '/projects/acme%2Fapp/merge_requests/1',
      body: { title: PR.title, description: PR.updatedBody },
      status: 200,
      response: mergeRequest(PR.updatedBody),
    },
    {
      method: 'GET',
      path: '/projects/acme%2Fapp/merge_requests',
      query: MR_QUERY,
      status: 200,
      response: [FORK_MERGE_REQUEST, mergeRequest(PR.updatedBody)],
    },
  ],
};
