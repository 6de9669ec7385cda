import { describe, expect, it } from 'vitest';
import { globToRegExp, isRepositoryAllowed } from '../../operator/src/reconcile/allow-repo.ts';

const allow = ['https://github.com/acme/*', 'git@github.com:platform/*', 'https://gitlab.internal/**'];

describe('isRepositoryAllowed', () => {
  it.each([
    'https://github.com/acme/webapp',
    'https://github.com/acme/webapp.git',
    'https://GitHub.com/acme/webapp.git',
    'git@github.com:platform/infra.git',
    'ssh://git@github.com/platform/infra.git',
    'https://gitlab.internal/group/sub/project.git',
  ])('allows %s', (url) => {
    expect(isRepositoryAllowed(url, allow)).toMatchObject({ allowed: true });
  });

  it.each([
    ['a look-alike host', 'https://github.com.evil.io/acme/x', 'does not match'],
    ['a look-alike owner', 'https://github.com/acme-evil/x', 'does not match'],
    ['a nested path under a one-segment glob', 'https://github.com/acme/x/y', 'does not match'],
    ['a dot-dot escape', 'https://github.com/acme/../evil/x', 'does not match'],
    ['an encoded slash escape', 'https://github.com/acme%2F..%2Fevil/x', 'does not match'],
    ['a remote helper', 'ext::sh -c touch% /tmp/pwned', 'whitespace'],
    ['a remote helper without spaces', 'ext::sh', 'remote helper'],
    ['a file URL', 'file:///etc/passwd', 'file://'],
    ['credentials in the URL', 'https://user:token@github.com/acme/x', 'credentials'],
    ['a user in an https URL', 'https://user@github.com/acme/x', 'credentials'],
    ['an option', '--upload-pack=touch /tmp/pwned', 'option'],
    ['another scheme', 'ftp://github.com/acme/x', 'scheme ftp'],
    ['a query', 'https://github.com/acme/x?ref=1', 'query'],
    ['a local path', '/srv/git/acme/x', 'not a URL'],
  ])('refuses %s', (_, url, why) => {
    const decision = isRepositoryAllowed(url, allow);
    expect(decision.allowed).toBe(false);
    expect((decision as { message: string }).message).toContain(why);
  });

  it('refuses everything, and says how to allow, when allowRepo is empty', () => {
    const decision = isRepositoryAllowed('https://github.com/acme/x', []);
    expect(decision).toMatchObject({ allowed: false, message: expect.stringContaining("operator's allowRepo") });
  });

  it('allows file:// only when an admin lists a file:// pattern', () => {
    expect(isRepositoryAllowed('file:///srv/git/demo.git', ['file:///srv/git/*'])).toMatchObject({ allowed: true });
    expect(isRepositoryAllowed('file:///etc/demo.git', ['file:///srv/git/*'])).toMatchObject({ allowed: false });
  });
});

describe('globToRegExp', () => {
  it('keeps * inside one path segment and lets ** cross segments', () => {
    expect(globToRegExp('a/*/c').test('a/b/c')).toBe(true);
    expect(globToRegExp('a/*/c').test('a/b/x/c')).toBe(false);
    expect(globToRegExp('a/**/c').test('a/b/x/c')).toBe(true);
    expect(globToRegExp('a.b').test('aXb')).toBe(false);
  });
});
