// Security #11.2 / #11.12: repository URLs an attacker would try against allowRepo, each with the
// decision the operator must make and what real git does with it (measured by
// git-contact-recorder.ts). One table for both tiers: the unit test runs each through
// isRepositoryAllowed and git, the integration test through the API server's admission policy.

/** The allowRepo every attack is checked against; `root` stands for a directory of file:// repositories. */
export function attackAllowRepo(root: string): string[] {
  return [
    'https://github.com/acme/*',
    'http://git.internal/acme/*',
    'git://git.internal/acme/*',
    'ssh://git@github.com/platform/*',
    'git@github.com:platform/*',
    `file://${root}/allowed/*`,
    'https://*.acme.dev/**',
    'https://xn--caf-dma.example/**',
  ];
}

export type ExpectedContact =
  | { host: string; port: number; user?: string; path?: string }
  /** file:// — which of the test repositories git read. */
  | { reads: 'allowed' | 'secret' }
  /** git contacts nothing (it refuses the URL itself, or finds no repository). */
  | 'nothing';

export interface RepoAttack {
  vector: string;
  url: string;
  allowed: boolean;
  /** For a refusal: a part of the operator's message. */
  because?: RegExp;
  git: ExpectedContact;
}

const NOT_CANONICAL = /is refused because/;
const NO_MATCH = /does not match the operator's allowRepo/;

export function repoAttacks(root: string): RepoAttack[] {
  const evil = (port = 443): ExpectedContact => ({ host: 'evil.example', port });
  const github = (port = 443): ExpectedContact => ({ host: 'github.com', port });
  const a = (vector: string, url: string, because: RegExp, git: ExpectedContact): RepoAttack => ({
    vector,
    url,
    allowed: false,
    because,
    git,
  });
  return [
    // Controls: allowed, and git goes where the pattern said.
    { vector: 'control', url: 'https://github.com/acme/webapp.git', allowed: true, git: github() },
    {
      vector: 'control',
      url: 'http://git.internal/acme/x',
      allowed: true,
      git: { host: 'git.internal', port: 80, path: '/acme/x/info/refs?service=git-upload-pack' },
    },
    { vector: 'control', url: 'git://git.internal/acme/x', allowed: true, git: { host: 'git.internal', port: 9418 } },
    { vector: 'control', url: 'https://docs.acme.dev/team/x', allowed: true, git: { host: 'docs.acme.dev', port: 443 } },
    { vector: 'control', url: `file://${root}/allowed/repo.git`, allowed: true, git: { reads: 'allowed' } },
    a('look-alike', 'https://github.com.evil.example/acme/x', NO_MATCH, { host: 'github.com.evil.example', port: 443 }),
    a('look-alike', 'https://github.com/acme-evil/x', NO_MATCH, github()),
    a('look-alike', 'https://evil.example/github.com/acme/x', NO_MATCH, evil()),

    a('backslash', 'https://github.com\\acme\\x@evil.example', /backslash/, evil()),
    a('backslash', 'https://github.com\\@evil.example/acme/x', /backslash/, evil()),
    a('backslash', 'https://evil.example\\@github.com/acme/x', /backslash/, github()),
    a('backslash', 'http://git.internal/acme\\..\\..\\evil/x', /backslash/, {
      host: 'git.internal',
      port: 80,
      path: '/acme\\..\\..\\evil/x/info/refs?service=git-upload-pack',
    }),
    a('backslash', 'git@github.com:platform\\..\\evil', /backslash/, { host: 'github.com', port: 22, user: 'git' }),

    a('percent-encoding', 'https://github%2Ecom/acme/x', /percent/, github()),
    a('percent-encoding', 'https://github.com%2Fevil.example/acme/x', /percent/, 'nothing'),
    a('percent-encoding', 'https://github.com%40evil.example/acme/x', /percent/, 'nothing'),
    a('percent-encoding', 'https://github.com%2E/acme/x', /percent/, { host: 'github.com.', port: 443 }),
    a('percent-encoding', 'https://github.com:%34%34%33/acme/x', /percent/, 'nothing'),
    a('percent-encoding', 'http%73://github.com/acme/x', /percent/, 'nothing'),
    a('percent-encoding', 'ssh://git%40evil.example@github.com/platform/x', /percent/, {
      host: 'github.com',
      port: 22,
      user: 'git@evil.example',
    }),
    a('percent-encoding', 'http://git.internal/acme/%2E%2E/evil/x', /percent/, {
      host: 'git.internal',
      port: 80,
      path: '/acme/%2E%2E/evil/x/info/refs?service=git-upload-pack',
    }),
    a('percent-encoding', 'http://git.internal/acme%2F..%2Fevil/x', /percent/, {
      host: 'git.internal',
      port: 80,
      path: '/acme%2F..%2Fevil/x/info/refs?service=git-upload-pack',
    }),
    a('percent-encoding', 'http://git.internal/acme/%2e%2e%5cevil', /percent/, { host: 'git.internal', port: 80 }),
    a('percent-encoding', 'http://git.internal/acme/%252E%252E/x', /percent/, { host: 'git.internal', port: 80 }),
    a('percent-encoding', 'https://github.com/acme/x%2F..%2F..%2Fevil%2Fy', /percent/, github()),
    a('percent-encoding', 'git@github.com:platform/%2E%2E/evil', /percent/, { host: 'github.com', port: 22, user: 'git' }),
    // #11.12: git decodes a file:// path, so %2F.. climbs out of the allowed directory.
    a('percent-encoding', `file://${root}/allowed/%2E%2E/secret.git`, /percent/, { reads: 'secret' }),
    a('percent-encoding', `file://${root}/allowed%2F..%2Fsecret.git`, /percent/, { reads: 'secret' }),
    a('percent-encoding', `file://${root}/allowed/%2e%2e%2fsecret.git`, /percent/, { reads: 'secret' }),

    a('userinfo', 'https://github.com@evil.example/acme/x', /credentials or a user/, evil()),
    a('userinfo', 'https://github.com:443@evil.example/acme/x', /credentials or a user/, evil()),
    a('userinfo', 'https://user:token@github.com/acme/x', /credentials or a user/, github()),
    a('userinfo', 'ssh://git@evil.example@github.com/platform/x', NOT_CANONICAL, {
      host: 'github.com',
      port: 22,
      user: 'git@evil.example',
    }),
    a('userinfo', 'ssh://git@github.com:22@evil.example/platform/x', NOT_CANONICAL, {
      host: 'evil.example',
      port: 22,
      user: 'git@github.com:22',
    }),
    a('userinfo', 'git@evil.example:github.com/platform/x', NO_MATCH, { host: 'evil.example', port: 22, user: 'git' }),
    a('userinfo', 'evil.example@github.com:platform/x', NO_MATCH, { host: 'github.com', port: 22, user: 'evil.example' }),
    a('userinfo', 'https://github.com/acme/x#@evil.example', /query or fragment/, github()),
    a('userinfo', 'https://github.com/acme/x?@evil.example', /query or fragment/, github()),

    a('punycode', 'https://xn--gthub-n4a.com/acme/x', NO_MATCH, { host: 'xn--gthub-n4a.com', port: 443 }),
    a('punycode', 'https://xn--80ak6aa92e.acme.dev/x', /punycode/, { host: 'xn--80ak6aa92e.acme.dev', port: 443 }),
    a('punycode', 'https://gíthub.com/acme/x', /non-ASCII/, 'nothing'),
    a('punycode', 'https://ｇithub.com/acme/x', /non-ASCII/, 'nothing'),
    { vector: 'punycode', url: 'https://xn--caf-dma.example/team/x', allowed: true, git: { host: 'xn--caf-dma.example', port: 443 } },

    a('trailing dot', 'https://github.com./acme/x', /ends with a dot/, { host: 'github.com.', port: 443 }),
    a('trailing dot', 'git@github.com.:platform/x', /ends with a dot/, { host: 'github.com.', port: 22, user: 'git' }),
    a('trailing dot', 'https://docs.acme.dev./team/x', /ends with a dot/, { host: 'docs.acme.dev.', port: 443 }),

    a('uppercase', 'https://GitHub.com/acme/x', /uppercase/, { host: 'GitHub.com', port: 443 }),
    a('uppercase', 'git@GitHub.com:platform/x', /uppercase/, { host: 'GitHub.com', port: 22, user: 'git' }),
    a('uppercase', 'HTTPS://github.com/acme/x', /scheme has uppercase/, 'nothing'),
    a('uppercase', 'https://github.com/ACME/x', NO_MATCH, github()),

    a('default port', 'https://github.com:443/acme/x', /default port/, github(443)),
    a('default port', 'http://git.internal:80/acme/x', /default port/, { host: 'git.internal', port: 80 }),
    a('default port', 'git://git.internal:9418/acme/x', /default port/, { host: 'git.internal', port: 9418 }),
    a('default port', 'ssh://git@github.com:22/platform/x', /default port/, { host: 'github.com', port: 22, user: 'git' }),
    a('default port', 'https://github.com:0443/acme/x', /leading zero/, github(443)),
    a('default port', 'https://github.com:8443/acme/x', NO_MATCH, github(8443)),
    a('default port', 'https://github.com:65979/acme/x', NOT_CANONICAL, 'nothing'),

    a('dot segments', 'https://github.com/acme/../evil/x', /"\." or "\.\."/, github()),
    a('dot segments', 'http://git.internal/acme/../evil/x', /"\." or "\.\."/, {
      host: 'git.internal',
      port: 80,
      path: '/evil/x/info/refs?service=git-upload-pack',
    }),
    a('dot segments', 'http://git.internal/acme/./x', /"\." or "\.\."/, {
      host: 'git.internal',
      port: 80,
      path: '/acme/x/info/refs?service=git-upload-pack',
    }),
    a('dot segments', 'http://git.internal/acme/x/..', /"\." or "\.\."/, {
      host: 'git.internal',
      port: 80,
      path: '/acme/info/refs?service=git-upload-pack',
    }),
    a('dot segments', 'git@github.com:platform/../evil/x', /"\." or "\.\."/, { host: 'github.com', port: 22, user: 'git' }),
    a('dot segments', 'ssh://git@github.com/platform/../evil/x', /"\." or "\.\."/, { host: 'github.com', port: 22, user: 'git' }),
    a('dot segments', `file://${root}/allowed/../secret.git`, /"\." or "\.\."/, { reads: 'secret' }),
    a('dot segments', `file://${root}/allowed//../secret.git`, NOT_CANONICAL, { reads: 'secret' }),
    a('dot segments', 'https://github.com/acme//x', /empty path segment/, github()),
    a('dot segments', 'https://github.com/acme/x/', /empty path segment/, github()),

    {
      vector: 'scp-like',
      url: 'git@github.com:platform/infra.git',
      allowed: true,
      git: { host: 'github.com', port: 22, user: 'git', path: "git-upload-pack 'platform/infra.git'" },
    },
    {
      vector: 'scp-like',
      url: 'ssh://git@github.com/platform/infra.git',
      allowed: true,
      git: { host: 'github.com', port: 22, user: 'git', path: "git-upload-pack '/platform/infra.git'" },
    },
    a('scp-like', 'github.com:platform/infra.git', /not a repository URL/, { host: 'github.com', port: 22 }),
    a('scp-like', 'git@github.com:/platform/infra.git', NO_MATCH, { host: 'github.com', port: 22, user: 'git' }),
    a('scp-like', '[git@github.com]:platform/x', NOT_CANONICAL, { host: 'github.com', port: 22, user: 'git' }),
    a('scp-like', 'git@[evil.example]:platform/x', NOT_CANONICAL, { host: 'evil.example', port: 22, user: 'git' }),
    a('scp-like', 'ssh://git@github.com:2222/platform/x', NO_MATCH, { host: 'github.com', port: 2222, user: 'git' }),
    a('scp-like', 'git@-oProxyCommand=x:platform/y', NOT_CANONICAL, { host: '-oProxyCommand=x', port: 22, user: 'git' }),
    a('scp-like', 'ssh://-oProxyCommand=touch%20/tmp/x/platform/x', /percent/, 'nothing'),

    a('option-like', '--upload-pack=touch /tmp/x', /option/, 'nothing'),
    a('option-like', '-u/tmp/x', /option/, 'nothing'),
    a('option-like', 'ext::sh -c touch% /tmp/pwned', /remote helper/, 'nothing'),
    a('option-like', 'fd::3', /remote helper/, 'nothing'),
    a('option-like', '/srv/git/x', /not a repository URL/, 'nothing'),
    a('option-like', `${root}/secret.git`, /not a repository URL/, { reads: 'secret' }),

    a('control characters', 'https://github.com/acme/x\n', /whitespace/, 'nothing'),
    a('control characters', 'https://github.com\t.evil.example/acme/x', /whitespace/, 'nothing'),
    a('control characters', 'https://github.com/acme/x\u202e', /non-ASCII/, github()),
  ];
}
