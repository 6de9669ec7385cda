// The operator config keys of the clone (security #11.2, #11.7): allowRepo patterns must be
// canonical URLs with wildcards, the checkout bounds have defaults and env variables, and run
// --local's own allowRepo passes the same rules.
import { describe, expect, it } from 'vitest';
import { ConfigError, loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { localOperatorConfig } from '../../operator/src/cli/local/local-operator-config.ts';
import { localRepositoryUrl } from '../../operator/src/cli/local/local-repository.ts';
import { isRepositoryAllowed } from '../../operator/src/reconcile/allow-repo.ts';

describe('security #11.7 maxCheckoutBytes and maxCheckoutFiles', () => {
  it('default to 1 GiB and 250000, and are read from the file and the environment', () => {
    expect(loadOperatorConfig({}, {})).toMatchObject({ maxCheckoutBytes: 1024 ** 3, maxCheckoutFiles: 250_000 });
    expect(loadOperatorConfig({ maxCheckoutBytes: 104857600 }, { CHAMVI_MAX_CHECKOUT_FILES: '5000' })).toMatchObject({
      maxCheckoutBytes: 104857600,
      maxCheckoutFiles: 5000,
    });
    expect(loadOperatorConfig({}, { CHAMVI_MAX_CHECKOUT_BYTES: '2097152' }).maxCheckoutBytes).toBe(2097152);
  });

  it.each([
    [{ maxCheckoutBytes: 1000 }, /config key maxCheckoutBytes: /],
    [{ maxCheckoutFiles: 0 }, /config key maxCheckoutFiles: /],
  ])('refuses %j naming the key', (file, message) => {
    expect(() => loadOperatorConfig(file, {})).toThrow(message);
  });
});

describe("maxGitMemoryBytes, each git's heap", () => {
  it('defaults to 64 MiB, is read from the file and the environment, and refuses less than 16 MiB', () => {
    expect(loadOperatorConfig({}, {}).maxGitMemoryBytes).toBe(64 * 1024 * 1024);
    expect(loadOperatorConfig({ maxGitMemoryBytes: 268435456 }, {}).maxGitMemoryBytes).toBe(268435456);
    expect(loadOperatorConfig({}, { CHAMVI_MAX_GIT_MEMORY_BYTES: '134217728' }).maxGitMemoryBytes).toBe(134217728);
    expect(() => loadOperatorConfig({ maxGitMemoryBytes: 1024 * 1024 }, {})).toThrow(/config key maxGitMemoryBytes: /);
  });
});

describe('security #11.2 allowRepo patterns in the config', () => {
  it.each([
    ['https://GitHub.com/acme/*', /config key allowRepo\.0: allowRepo pattern https:\/\/GitHub\.com\/acme\/\* can never match .*uppercase/],
    ['**', /config key allowRepo\.0: .*can never match/],
    ['https://github.com:443/acme/*', /default port/],
    ['https://github.com/acme%2F*', /characters no canonical repository URL has/],
  ])('refuses the pattern %s at start-up, saying why', (pattern, message) => {
    expect(() => loadOperatorConfig({ allowRepo: [pattern] }, {})).toThrow(ConfigError);
    expect(() => loadOperatorConfig({ allowRepo: [pattern] }, {})).toThrow(message);
  });

  it('accepts canonical patterns with wildcards', () => {
    const patterns = [
      'https://github.com/acme/*',
      'git@github.com:acme/*',
      'https://*.acme.dev/**',
      'file:///srv/git/*',
      'http://127.0.0.1:*/**',
    ];
    expect(loadOperatorConfig({ allowRepo: patterns }, {}).allowRepo).toEqual(patterns);
  });
});

describe('security #11.2 run --local repositories', () => {
  const config = localOperatorConfig();

  it('allows every canonical URL and a local path as file:// + the path as it is', () => {
    for (const url of [
      'https://git.example.org/team/app.git',
      'git@github.com:acme/app.git',
      'ssh://git@h:2222/x',
      'git://127.0.0.1/hello.git',
    ]) {
      expect(isRepositoryAllowed(url, config.allowRepo)).toMatchObject({ allowed: true, url });
    }
    expect(localRepositoryUrl('./hello', '/work/examples')).toBe('file:///work/examples/hello');
    expect(isRepositoryAllowed(localRepositoryUrl('./hello', '/work/examples'), config.allowRepo).allowed).toBe(true);
  });

  it('refuses what is not canonical, naming the character, instead of percent-encoding a path', () => {
    const spaced = localRepositoryUrl('./my repo', '/work');
    expect(spaced).toBe('file:///work/my repo');
    expect(isRepositoryAllowed(spaced, config.allowRepo)).toMatchObject({ allowed: false, message: expect.stringContaining('whitespace') });
    expect(isRepositoryAllowed('https://github.com\\acme\\x@evil.example', config.allowRepo)).toMatchObject({ allowed: false });
    expect(isRepositoryAllowed('--upload-pack=id', config.allowRepo)).toMatchObject({ allowed: false });
  });
});
