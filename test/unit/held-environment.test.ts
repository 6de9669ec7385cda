// The run's variables node and the dynamic loader read at start are held back from the sandbox
// container's environment (which pods/exec gives the toolbox) and given back to bash only.
import { describe, expect, it } from 'vitest';
import { codingRunSpec, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { buildSandboxPod } from '../../operator/src/reconcile/sandbox-pod.ts';
import { isHeldEnvName, releasedEnvironment } from '../../sandbox-image/toolbox/contract/held-environment.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

const config = loadOperatorConfig({ sandboxImage: 'chamvi/sandbox:1' }, {});

function parsedRun(env: Array<{ name: string; value: string }>): ParsedCodingRun {
  const run = codingRunFixture({ spec: { sandbox: { env } } });
  return { ...run, spec: codingRunSpec.parse(run.spec) };
}

describe('buildSandboxPod: variables read when the toolbox starts', () => {
  const env = buildSandboxPod(
    parsedRun([
      { name: 'NODE_OPTIONS', value: '--require ./.pnp.cjs' },
      { name: 'LD_PRELOAD', value: '/workspace/x.so' },
      { name: 'OPENSSL_CONF', value: '/workspace/openssl.cnf' },
      { name: 'PATH', value: '/workspace/.venv/bin:/usr/bin:/bin' },
      { name: 'CI', value: '$HOME' },
    ]),
    config,
  ).spec!.containers[0]!.env!;
  const names = env.map((variable) => variable.name);

  it('are in the container only under CHAMVI_RUN_ENV_<name>, with their values', () => {
    expect(names).not.toContain('NODE_OPTIONS');
    expect(names).not.toContain('LD_PRELOAD');
    expect(names).not.toContain('OPENSSL_CONF');
    expect(env).toEqual(
      expect.arrayContaining([
        { name: 'CHAMVI_RUN_ENV_NODE_OPTIONS', value: '--require ./.pnp.cjs' },
        { name: 'CHAMVI_RUN_ENV_LD_PRELOAD', value: '/workspace/x.so' },
        { name: 'CHAMVI_RUN_ENV_OPENSSL_CONF', value: '/workspace/openssl.cnf' },
      ]),
    );
  });

  it('leave the others as the run wrote them', () => {
    expect(env).toEqual(
      expect.arrayContaining([
        { name: 'PATH', value: '/workspace/.venv/bin:/usr/bin:/bin' },
        { name: 'CI', value: '$$HOME' },
      ]),
    );
  });
});

describe('releasedEnvironment', () => {
  it("gives the held variables back under their names, over the image's, and drops the wrapped names", () => {
    expect(
      releasedEnvironment({
        PATH: '/usr/bin',
        NODE_COMPILE_CACHE: '/opt/chamvi/node-compile-cache',
        CHAMVI_RUN_ENV_NODE_COMPILE_CACHE: '/workspace/.cache',
        CHAMVI_RUN_ENV_LD_PRELOAD: '/workspace/x.so',
        CHAMVI_RUN_ENV_NOT_HELD: 'x',
      }),
    ).toEqual({ PATH: '/usr/bin', NODE_COMPILE_CACHE: '/workspace/.cache', LD_PRELOAD: '/workspace/x.so' });
  });

  it.each([
    ['NODE_OPTIONS', true],
    ['LD_LIBRARY_PATH', true],
    ['OPENSSL_MODULES', true],
    ['GCONV_PATH', true],
    ['PATH', false],
    ['HOME', false],
    ['MY_NODE_X', false],
  ])('holds %s: %s', (name, held) => {
    expect(isHeldEnvName(name)).toBe(held);
  });
});
