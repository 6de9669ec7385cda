// allowRepo decisions (security #11.2, #11.12): every attack URL is refused for the reason it is
// not canonical or not allowed, and real git shows what it would have contacted — for every
// allowed URL, exactly the host (port, user) the pattern allowed.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { allowRepoPatternProblem, allowRepoPatternRegex, isRepositoryAllowed } from '../../operator/src/reconcile/allow-repo.ts';
import { isCanonicalRepositoryUrl, repositoryUrlParts } from '../../operator/src/reconcile/canonical-repository-url.ts';
import { attackAllowRepo, repoAttacks } from '../support/allow-repo-attacks.ts';
import { whatGitContacts, type GitContact } from '../support/git-contact-recorder.ts';

const DEFAULT_PORTS: Record<string, number> = { https: 443, http: 80, ssh: 22, git: 9418 };

// The file:// attacks need real repositories: one under the allowed directory, one outside it.
const root = mkdtempSync(join(tmpdir(), 'allow-repo-'));
const heads: Record<string, 'allowed' | 'secret'> = {};

function makeRepository(path: string, name: 'allowed' | 'secret'): void {
  const work = mkdtempSync(join(tmpdir(), 'allow-repo-work-'));
  const git = (...args: string[]) =>
    execFileSync('git', args, { cwd: work, encoding: 'utf8', env: { ...process.env, GIT_CONFIG_GLOBAL: '/dev/null' } }).trim();
  git('init', '-q', '-b', 'main');
  execFileSync('sh', ['-c', `echo ${name} > f`], { cwd: work });
  git('add', 'f');
  git('-c', 'user.name=t', '-c', 'user.email=t@example.com', 'commit', '-qm', name);
  execFileSync('git', ['clone', '-q', '--bare', work, path]);
  heads[git('rev-parse', 'HEAD')] = name;
  rmSync(work, { recursive: true, force: true });
}

beforeAll(() => {
  makeRepository(join(root, 'allowed', 'repo.git'), 'allowed');
  makeRepository(join(root, 'secret.git'), 'secret');
});

afterAll(() => rmSync(root, { recursive: true, force: true }));

function described(contact: GitContact): unknown {
  if (contact.kind === 'none') return 'nothing';
  if (contact.kind === 'file') return { reads: heads[contact.head] ?? contact.head };
  return contact;
}

describe('security #11.2 allowRepo canonical URLs: every attack vector, the decision and what git contacts', () => {
  const allowRepo = attackAllowRepo(root);

  it.each(repoAttacks(root).map((attack) => [attack.vector, JSON.stringify(attack.url), attack] as const))(
    '%s: %s',
    async (_vector, _shown, attack) => {
      const decision = isRepositoryAllowed(attack.url, allowRepo);
      expect(decision.allowed).toBe(attack.allowed);
      if (!decision.allowed && attack.because) expect(decision.message).toMatch(attack.because);

      const contact = await whatGitContacts(attack.url);
      if (attack.git === 'nothing' || 'reads' in attack.git) expect(described(contact)).toEqual(attack.git);
      else expect(contact).toMatchObject({ kind: 'network', ...attack.git });

      if (decision.allowed) {
        // What was checked is what git got, and git went to the host the URL names, nowhere else.
        expect(decision.url).toBe(attack.url);
        const parts = repositoryUrlParts(attack.url)!;
        if (parts.scheme === 'file') {
          expect(contact.kind).toBe('file');
        } else {
          expect(contact).toMatchObject({ kind: 'network', host: parts.host, port: parts.port ?? DEFAULT_PORTS[parts.scheme] });
          if (parts.scheme === 'ssh') expect((contact as { user?: string }).user).toBe(parts.user);
        }
      }
    },
    30_000,
  );
});

describe('security #11.2 allowRepo patterns', () => {
  it.each([
    ['https://GitHub.com/acme/*', /uppercase/],
    ['**', /not a repository URL/],
    ['*://github.com/**', /can never match/],
    ['https://github.com:443/acme/*', /default port/],
    ['https://github.com/acme/ *', /characters no canonical/],
    ['https://github.com/acme%2F*', /characters no canonical/],
    ['https://github.com/acme/*/', /empty path segment/],
    ['https://github.com', /no repository path/],
  ])('refuses the pattern %s, saying why', (pattern, why) => {
    expect(allowRepoPatternProblem(pattern)).toMatch(why);
  });

  it('accepts patterns with wildcards in the host, path and ssh user', () => {
    for (const pattern of [
      'https://github.com/acme/*',
      'https://*.acme.dev/**',
      'git@github.com:platform/*',
      '*@*:**',
      'file:///srv/git/*',
      'https://h/?x',
    ]) {
      expect(allowRepoPatternProblem(pattern)).toBeUndefined();
    }
  });

  it('compiles `*` to one segment, `**` to any, `?` to one character, and quotes the rest (RE2 and JavaScript alike)', () => {
    expect(allowRepoPatternRegex('https://github.com/acme/*.git')).toBe('^https://github\\.com/acme/[^/]*\\.git$');
    expect(allowRepoPatternRegex('https://h/**')).toBe('^https://h/.*$');
    expect(allowRepoPatternRegex('https://h/a+?')).toBe('^https://h/a\\+[^/]$');
    const allow = ['https://github.com/acme/*'];
    expect(isRepositoryAllowed('https://github.com/acme/x', allow).allowed).toBe(true);
    expect(isRepositoryAllowed('https://github.com/acme/x/y', allow).allowed).toBe(false);
    expect(isRepositoryAllowed('https://githubXcom/acme/x', ['https://github.com/acme/*']).allowed).toBe(false);
  });

  it('lets a file:// URL match only a file:// pattern, and an scp-like URL only an scp-like pattern', () => {
    const everything = ['https://*/**', 'http://*/**', 'git://*/**', 'ssh://*/**'];
    expect(isRepositoryAllowed('file:///etc/repo.git', everything).allowed).toBe(false);
    expect(isRepositoryAllowed('git@github.com:acme/x', everything).allowed).toBe(false);
    expect(isRepositoryAllowed('file:///srv/git/demo.git', ['file:///srv/git/*']).allowed).toBe(true);
  });

  it('refuses everything, and says how to allow, when allowRepo is empty', () => {
    expect(isRepositoryAllowed('https://github.com/acme/x', [])).toMatchObject({
      allowed: false,
      message: expect.stringContaining("operator's allowRepo"),
    });
  });

  it('shows a URL with control characters escaped in the refusal', () => {
    const decision = isRepositoryAllowed('https://github.com/acme/x\u001b[2K', ['https://github.com/acme/*']);
    expect(decision).toMatchObject({ allowed: false });
    expect((decision as { message: string }).message).not.toContain('\u001b');
    expect((decision as { message: string }).message).toContain('\\u001b[2K');
  });
});

describe('security #11.2 the canonical grammar', () => {
  it.each([
    'https://github.com/acme/webapp.git',
    'https://git.example.com:8443/a/b/c.git',
    'http://127.0.0.1:3000/acme/x',
    'ssh://git@github.com/acme/x.git',
    'ssh://github.com:2222/acme/x',
    'git@github.com:acme/x.git',
    'git@github.com:/srv/x.git',
    'git://git.internal/x',
    'file:///srv/git/x.git',
    'https://h/a/.well-known/...x/~u/a+b_c-d',
  ])('accepts %s', (url) => {
    expect(isCanonicalRepositoryUrl(url)).toBe(true);
  });

  it('splits a canonical URL into the parts git will use', () => {
    expect(repositoryUrlParts('https://git.example.com:8443/a/b.git')).toEqual({
      scheme: 'https',
      host: 'git.example.com',
      port: 8443,
      path: '/a/b.git',
    });
    expect(repositoryUrlParts('git@github.com:acme/x.git')).toEqual({ scheme: 'ssh', user: 'git', host: 'github.com', path: 'acme/x.git' });
    expect(repositoryUrlParts('file:///srv/x')).toEqual({ scheme: 'file', host: '', path: '/srv/x' });
    expect(repositoryUrlParts('https://github.com\\acme\\x@evil.example')).toBeUndefined();
  });
});
