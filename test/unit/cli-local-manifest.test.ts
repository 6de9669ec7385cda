// run --local before anything starts: the command line, reading a multi-document manifest,
// and accepting its CodingRun with the operator's validation plus the local rules for
// repositories (local paths, no allowRepo, option-like URLs refused) and API keys.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, describe, expect, it } from 'vitest';
import { acceptLocalRun, apiKeySourceNote } from '../../operator/src/cli/local/accept-local-run.ts';
import { localModelEndpoints, localOperatorConfig } from '../../operator/src/cli/local/local-operator-config.ts';
import { localRepositoryUrl } from '../../operator/src/cli/local/local-repository.ts';
import { readManifest } from '../../operator/src/cli/local/manifest-file.ts';
import { parseArguments } from '../../operator/src/cli/parse-arguments.ts';

const dir = mkdtempSync(path.join(tmpdir(), 'chamvi-local-manifest-test-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const noStdin = Readable.from([]);
const now = new Date('2026-01-01T00:00:00Z');

function file(name: string, text: string): string {
  const target = path.join(dir, name);
  writeFileSync(target, text);
  return target;
}

const RUN = `apiVersion: chamvi.dev/v1alpha1
kind: CodingRun
metadata:
  name: demo
spec:
  task: Greet.
  repository:
    url: ./hello
  model:
    provider: scripted
    scriptRef:
      name: script
`;
const SCRIPT = `apiVersion: v1
kind: ConfigMap
metadata:
  name: script
data:
  script.json: '{"turns": [{"text": "hi"}]}'
`;

describe('run --local command line', () => {
  it('parses -f, --local, -n and --redis-url', () => {
    expect(parseArguments(['run', '-f', 'x.yaml', '--local'])).toEqual({ command: 'run', file: 'x.yaml', local: true });
    expect(parseArguments(['run', '-f', '-', '--local', '-n', 'agents', '--redis-url', 'redis://127.0.0.1:6380'])).toEqual({
      command: 'run',
      file: '-',
      local: true,
      namespace: 'agents',
      redisUrl: 'redis://127.0.0.1:6380',
    });
  });

  it.each([
    [['run', '-f', 'x.yaml'], /run needs --local/],
    [['run', '-f', 'x.yaml', '--local', '--redis-url', 'localhost:6379'], /--redis-url must be a redis:\/\//],
    [['run', '-f', 'x.yaml', '--local', '--kubeconfig', 'k'], /--kubeconfig does not apply to run/],
    [['get', '--redis-url', 'redis://x'], /--redis-url does not apply to get/],
  ])('refuses %j with exit 2', (argv, message) => {
    expect(() => parseArguments(argv)).toThrow(message);
    try {
      parseArguments(argv);
    } catch (error) {
      expect((error as { exitCode: number }).exitCode).toBe(2);
    }
  });
});

describe('localRepositoryUrl', () => {
  it.each([
    ['./hello', '/work/examples', 'file:///work/examples/hello'],
    ['../repos/hello', '/work/examples', 'file:///work/repos/hello'],
    ['hello', '/work', 'file:///work/hello'],
    ['/srv/git/app', '/work', 'file:///srv/git/app'],
    ['~/code/app', '/work', `file://${path.join(homedir(), 'code/app')}`],
    ['file:///srv/git/app', '/work', 'file:///srv/git/app'],
    ['https://github.com/acme/app.git', '/work', 'https://github.com/acme/app.git'],
    ['git@github.com:acme/app.git', '/work', 'git@github.com:acme/app.git'],
    ['ext::sh -c id', '/work', 'ext::sh -c id'],
    ['--upload-pack=id', '/work', '--upload-pack=id'],
  ])('%s (from %s) → %s', (url, directory, expected) => {
    expect(localRepositoryUrl(url, directory)).toBe(expected);
  });
});

describe('readManifest', () => {
  it('finds the run and the ConfigMaps and Secrets of its namespace, decoding Secret data', async () => {
    const source = file(
      'all.yaml',
      `${SCRIPT}---
apiVersion: v1
kind: Secret
metadata:
  name: keys
  labels:
    chamvi.dev/usable-by-runs: "true"
data:
  apiKey: ${Buffer.from('sk-from-data').toString('base64')}
stringData:
  token: plain
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: other
  namespace: elsewhere
data:
  x: y
---
apiVersion: v1
kind: Namespace
metadata:
  name: agents
---
${RUN}`,
    );
    const manifest = await readManifest(source, noStdin);
    expect(manifest.run.metadata).toMatchObject({ name: 'demo', namespace: 'default' });
    expect(manifest.directory).toBe(dir);
    expect([...manifest.configMaps.keys()]).toEqual(['script']);
    expect(manifest.secrets.get('keys')).toEqual({ apiKey: 'sk-from-data', token: 'plain' });
    expect(manifest.secretLabels?.get('keys')).toEqual({ 'chamvi.dev/usable-by-runs': 'true' });
    expect(manifest.ignored).toEqual(['ConfigMap/other', 'Namespace/agents']);
  });

  it('takes the items of a List and the namespace from -n when the run has none', async () => {
    const list = {
      apiVersion: 'v1',
      kind: 'List',
      items: [{ apiVersion: 'chamvi.dev/v1alpha1', kind: 'CodingRun', metadata: { name: 'listed' }, spec: { task: 't' } }],
    };
    const manifest = await readManifest(file('list.json', JSON.stringify(list)), noStdin, 'agents');
    expect(manifest.run.metadata).toMatchObject({ name: 'listed', namespace: 'agents' });
  });

  it('reads stdin for -f -', async () => {
    const manifest = await readManifest('-', Readable.from([RUN]));
    expect(manifest.source).toBe('stdin');
    expect(manifest.run.metadata.name).toBe('demo');
  });

  it.each([
    ['no run', SCRIPT, /holds no CodingRun/],
    ['two runs', `${RUN}---\n${RUN.replace('name: demo', 'name: two')}`, /holds 2 CodingRuns \(demo, two\); run --local runs one/],
    ['broken YAML', `${RUN}\n  : [`, /document 1 is not valid YAML/],
    ['a wrong apiVersion', RUN.replace('chamvi.dev/v1alpha1', 'chamvi.dev/v1'), /apiVersion "chamvi.dev\/v1"; use chamvi.dev\/v1alpha1/],
    ['a run without a name', RUN.replace('  name: demo\n', '  labels: {}\n'), /the CodingRun has no metadata.name/],
    [
      'a non-string ConfigMap value',
      `${SCRIPT.replace('script.json: \'{"turns": [{"text": "hi"}]}\'', 'retries: 3')}---\n${RUN}`,
      /ConfigMap script data\.retries must be a string/,
    ],
  ])('refuses a file with %s', async (_, text, message) => {
    await expect(readManifest(file('bad.yaml', text), noStdin)).rejects.toThrow(message);
  });

  it('refuses a -n that contradicts the run namespace, as kubectl does', async () => {
    await expect(
      readManifest(file('ns.yaml', RUN.replace('name: demo', 'name: demo\n  namespace: team')), noStdin, 'agents'),
    ).rejects.toThrow(/"team"\) does not match --namespace "agents"/);
  });
});

describe('acceptLocalRun', () => {
  const accept = async (text: string, env: NodeJS.ProcessEnv = {}) =>
    acceptLocalRun(await readManifest(file('accept.yaml', text), noStdin), env, localOperatorConfig(), now);

  it('gives the run an identity and its local repository path as a file:// URL', async () => {
    const accepted = await accept(`${SCRIPT}---\n${RUN}`);
    expect(accepted.run.metadata).toMatchObject({
      name: 'demo',
      namespace: 'default',
      generation: 1,
      creationTimestamp: now.toISOString(),
    });
    expect(accepted.run.metadata.uid).toMatch(/^[0-9a-f-]{36}$/);
    expect(accepted.spec.repository.url).toBe(`file://${dir}/hello`);
    expect((accepted.run.spec.repository as { url: string }).url).toBe(`file://${dir}/hello`);
    expect(accepted.spec.budget.maxSteps).toBe(40);
  });

  const openaiRun = RUN.replace(
    '    provider: scripted\n    scriptRef:\n      name: script\n',
    '    provider: openai\n    name: gpt-5.6\n    apiKeySecretRef:\n      name: openai\n',
  );

  it('takes an API key missing from the file from CHAMVI_API_KEY, then the provider variable', async () => {
    const fromChamvi = await accept(openaiRun, { CHAMVI_API_KEY: 'sk-chamvi', OPENAI_API_KEY: 'sk-openai' });
    expect(fromChamvi.apiKeyFrom).toBe('CHAMVI_API_KEY');
    expect(fromChamvi.secrets.get('openai')).toEqual({ apiKey: 'sk-chamvi' });
    const fromOpenai = await accept(openaiRun, { OPENAI_API_KEY: 'sk-openai' });
    expect(fromOpenai.apiKeyFrom).toBe('OPENAI_API_KEY');
    expect(fromOpenai.secrets.get('openai')).toEqual({ apiKey: 'sk-openai' });
  });

  it('prefers the Secret in the file to the environment', async () => {
    const secret =
      'apiVersion: v1\nkind: Secret\nmetadata:\n  name: openai\n  labels:\n    chamvi.dev/usable-by-runs: "true"\nstringData:\n  apiKey: sk-file\n';
    const accepted = await accept(`${secret}---\n${openaiRun}`, { OPENAI_API_KEY: 'sk-openai' });
    expect(accepted.apiKeyFrom).toBeUndefined();
    expect(accepted.secrets.get('openai')).toEqual({ apiKey: 'sk-file' });
  });

  it('security #11.3: refuses a Secret in the file without the usable-by-runs label, as the operator would', async () => {
    const secret = 'apiVersion: v1\nkind: Secret\nmetadata:\n  name: openai\nstringData:\n  apiKey: sk-file\n';
    await expect(accept(`${secret}---\n${openaiRun}`, { OPENAI_API_KEY: 'sk-openai' })).rejects.toThrow(
      /SecretNotAllowed: Secret default\/openai .* kubectl label secret openai -n default chamvi\.dev\/usable-by-runs=true/,
    );
  });

  it('security #11.3: allows the endpoint a local run names when it is canonical, and refuses one that is not', async () => {
    const compatible = (baseURL: string) => openaiRun.replace('provider: openai', `provider: openai-compatible\n    baseURL: ${baseURL}`);
    // As run-locally.ts does: the run's own endpoint is the user's choice on the user's machine.
    const acceptLocally = async (text: string, env: NodeJS.ProcessEnv) => {
      const manifest = await readManifest(file('local.yaml', text), noStdin);
      return acceptLocalRun(manifest, env, localOperatorConfig(undefined, undefined, localModelEndpoints(manifest.run)), now);
    };
    const accepted = await acceptLocally(compatible('http://127.0.0.1:11434/v1'), { CHAMVI_API_KEY: 'sk-chamvi' });
    expect(accepted.spec.model.baseURL).toBe('http://127.0.0.1:11434/v1');
    await expect(acceptLocally(compatible('http://127.1:11434/v1'), { CHAMVI_API_KEY: 'sk-chamvi' })).rejects.toThrow(
      /ModelEndpointNotAllowed: .*canonical form/,
    );
  });

  // A repository's run.yaml chooses the endpoint of openai-compatible: a vendor's variable holds
  // a key for that vendor's endpoint and must not go to one the file names.
  describe('security #11.3: a provider variable never goes to an endpoint the file names', () => {
    const compatible = (baseURL: string) =>
      openaiRun
        .replace('provider: openai', `provider: openai-compatible\n    baseURL: ${baseURL}`)
        .replace('name: openai\n', 'name: llm\n');
    const acceptLocally = async (text: string, env: NodeJS.ProcessEnv) => {
      const manifest = await readManifest(file('endpoint.yaml', text), noStdin);
      return acceptLocalRun(manifest, env, localOperatorConfig(undefined, undefined, localModelEndpoints(manifest.run)), now);
    };
    const attacker = compatible('https://collector.attacker.example/v1');

    it('refuses a run whose key would be OPENAI_API_KEY sent to the endpoint the file names, saying why', async () => {
      await expect(acceptLocally(attacker, { OPENAI_API_KEY: 'sk-proj-REALOPENAIKEY123' })).rejects.toThrow(
        /names Secret llm \(key "apiKey"\), which is not in the file; add the Secret to the file or set CHAMVI_API_KEY \(OPENAI_API_KEY is not sent to an endpoint the file names: https:\/\/collector\.attacker\.example\/v1\)$/,
      );
    });

    it('takes CHAMVI_API_KEY, set for this command, and says which host the key goes to', async () => {
      const accepted = await acceptLocally(attacker, { CHAMVI_API_KEY: 'sk-chamvi', OPENAI_API_KEY: 'sk-openai' });
      expect(accepted.secrets.get('llm')).toEqual({ apiKey: 'sk-chamvi' });
      expect(apiKeySourceNote(accepted)).toBe(
        'the API key for Secret llm comes from $CHAMVI_API_KEY and is sent to collector.attacker.example',
      );
    });

    it('takes a Secret in the file, with nothing to note', async () => {
      const secret =
        'apiVersion: v1\nkind: Secret\nmetadata:\n  name: llm\n  labels:\n    chamvi.dev/usable-by-runs: "true"\nstringData:\n  apiKey: sk-file\n';
      const accepted = await acceptLocally(`${secret}---\n${attacker}`, { OPENAI_API_KEY: 'sk-openai' });
      expect(accepted.secrets.get('llm')).toEqual({ apiKey: 'sk-file' });
      expect(apiKeySourceNote(accepted)).toBeUndefined();
    });

    it("names the vendor's host when the provider variable goes to the provider's own endpoint", async () => {
      const accepted = await accept(openaiRun, { OPENAI_API_KEY: 'sk-openai' });
      expect(apiKeySourceNote(accepted)).toBe('the API key for Secret openai comes from $OPENAI_API_KEY and is sent to api.openai.com');
    });

    it('keeps the port of a local endpoint in the note', async () => {
      const accepted = await acceptLocally(compatible('http://127.0.0.1:11434/v1'), { CHAMVI_API_KEY: 'sk-chamvi' });
      expect(apiKeySourceNote(accepted)).toBe('the API key for Secret llm comes from $CHAMVI_API_KEY and is sent to 127.0.0.1:11434');
    });
  });

  // A key from a variable is for the model's endpoint alone: a file that named its Secret for the
  // clone or the push too would have git send the user's key as Basic auth to the repository's
  // host, before any model call or approval, while the note says it goes to api.openai.com.
  describe('security #11.3: a key from a variable goes to the model only', () => {
    const attackerRepository = 'https://collector.attacker.example/x.git';
    const withRepository = (text: string) => text.replace('./hello', attackerRepository);
    const cloneWithKey = withRepository(openaiRun).replace(
      `url: ${attackerRepository}\n`,
      `url: ${attackerRepository}\n    credentialsSecretRef:\n      name: openai\n      key: apiKey\n`,
    );
    const pushWithKey = `${withRepository(openaiRun)}  publish:\n    branch: chamvi/{run}\n    credentialsSecretRef:\n      name: openai\n      key: apiKey\n`;

    it.each([
      [
        'spec.repository.credentialsSecretRef',
        'the same key, from OPENAI_API_KEY',
        cloneWithKey,
        { OPENAI_API_KEY: 'sk-proj-USERS-REAL-KEY' },
      ],
      ['spec.repository.credentialsSecretRef', 'the same key, from CHAMVI_API_KEY', cloneWithKey, { CHAMVI_API_KEY: 'sk-chamvi' }],
      ['spec.publish.credentialsSecretRef', 'the same key, from OPENAI_API_KEY', pushWithKey, { OPENAI_API_KEY: 'sk-proj-USERS-REAL-KEY' }],
      // The Secret would carry the opt-in the variable gave, which the file's own token must not borrow.
      [
        'spec.repository.credentialsSecretRef',
        'another key of it, which the file holds unlabelled',
        `apiVersion: v1\nkind: Secret\nmetadata:\n  name: openai\nstringData:\n  token: t\n---\n${cloneWithKey.replace('key: apiKey\n  model', 'key: token\n  model')}`,
        { OPENAI_API_KEY: 'sk-proj-USERS-REAL-KEY' },
      ],
    ])('refuses a run whose %s names the Secret a variable fills (%s)', async (field, _, text, env) => {
      await expect(accept(text, env)).rejects.toThrow(
        new RegExp(`codingrun/demo: ${field.replaceAll('.', '\\.')} names Secret openai, which holds the API key from \\$`),
      );
    });

    it('still takes the key for a run whose other references name other Secrets', async () => {
      const token =
        'apiVersion: v1\nkind: Secret\nmetadata:\n  name: git\n  labels:\n    chamvi.dev/usable-by-runs: "true"\nstringData:\n  token: t\n';
      const accepted = await accept(
        `${token}---\n${cloneWithKey.replace('name: openai\n      key: apiKey', 'name: git\n      key: token')}`,
        {
          OPENAI_API_KEY: 'sk-openai',
        },
      );
      expect(accepted.secrets.get('openai')).toEqual({ apiKey: 'sk-openai' });
      expect(accepted.spec.repository.credentialsSecretRef).toEqual({ name: 'git', key: 'token' });
    });
  });

  it.each([
    ['an invalid field', `${SCRIPT}---\n${RUN.replace('  task: Greet.', '  task: ""')}`, /accept\.yaml: codingrun\/demo: spec\.task: /],
    ['a missing API key', openaiRun, /not in the file; add the Secret to the file or set CHAMVI_API_KEY or OPENAI_API_KEY$/],
    [
      'a missing script',
      RUN,
      /ConfigMapNotFound: ConfigMap default\/script named in spec\.model\.scriptRef does not exist; add it to the file/,
    ],
    ['a missing key of the script', `${SCRIPT.replace('script.json', 'other.json')}---\n${RUN}`, /has no key "script\.json"/],
    [
      'a remote helper',
      `${SCRIPT}---\n${RUN.replace('./hello', 'ext::sh')}`,
      /RepoNotAllowed: repository ext::sh is refused because it uses a git remote helper/,
    ],
    [
      'a URL with credentials',
      `${SCRIPT}---\n${RUN.replace('./hello', 'https://user:pw@github.com/acme/app.git')}`,
      /RepoNotAllowed: .* carries credentials/,
    ],
  ])('refuses %s, naming the file, the run and the field', async (_, text, message) => {
    await expect(accept(text)).rejects.toThrow(message);
  });

  // The toolbox's own node and git run with the run's variables locally (local-env-names.ts).
  const withEnv = (name: string) =>
    `${SCRIPT}---\n${RUN}  sandbox:\n    env:\n      - name: CI\n        value: "1"\n      - name: ${name}\n        value: x\n`;

  it.each([
    'PATH',
    'HOME',
    'NODE_PATH',
    'LD_PRELOAD',
    'DYLD_INSERT_LIBRARIES',
    'GIT_CONFIG_COUNT',
    'BASH_ENV',
    'ENV',
    'XDG_CONFIG_HOME',
    'OPENSSL_CONF',
    'GCONV_PATH',
    'SHELLOPTS',
    'BASHOPTS',
    'PS4',
    'DEVELOPER_DIR',
    'SDKROOT',
    'TOOLCHAINS',
  ])('security: refuses spec.sandbox.env %s, which the local toolbox itself would read, saying what to do instead', async (name) => {
    await expect(accept(withEnv(name))).rejects.toThrow(
      new RegExp(
        `^.*accept\\.yaml: codingrun/demo: spec\\.sandbox\\.env\\[1\\]\\.name: ${name} cannot be set for run --local: .*Set it in the command instead`,
      ),
    );
  });

  it.each(['MY_PATH', 'NODE_ENV'])('takes other spec.sandbox.env variables, such as CI and %s', async (name) => {
    const accepted = await accept(withEnv(name));
    expect(accepted.spec.sandbox.env).toEqual([
      { name: 'CI', value: '1' },
      { name, value: 'x' },
    ]);
  });

  it('allows any remote repository: there is no allowRepo in local mode', async () => {
    const accepted = await accept(`${SCRIPT}---\n${RUN.replace('./hello', 'https://git.example.org/team/app.git')}`);
    expect(accepted.spec.repository.url).toBe('https://git.example.org/team/app.git');
  });
});
