// pods/exec starts the toolbox with the container's environment, whose PATH is the run's
// (spec.sandbox.env): a bare `node` was looked up there, so a PATH starting in the workspace ran
// a committed .venv/bin/node as the toolbox, before any approval. The default toolboxCommand
// names node by a path every sandbox has, the default image's and a custom image's alike.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { codingRunSpec, type ParsedCodingRun } from '../../operator/src/api/index.ts';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';
import { buildSandboxPod } from '../../operator/src/reconcile/sandbox-pod.ts';
import { codingRunFixture } from '../support/coding-run-fixture.ts';

const config = loadOperatorConfig({ sandboxImage: 'chamvi/sandbox:1' }, {});
const venvPath = [{ name: 'PATH', value: '/workspace/.venv/bin:/usr/local/bin:/usr/bin:/bin' }];

function parsedRun(sandbox: Record<string, unknown>): ParsedCodingRun {
  const run = codingRunFixture({ spec: { sandbox } });
  return { ...run, spec: codingRunSpec.parse(run.spec) };
}

describe('the default toolboxCommand', () => {
  const [program, bundle] = config.toolboxCommand;

  it('runs node and the toolbox by absolute paths, never looked up on the run PATH', () => {
    expect(config.toolboxCommand).toEqual(['/opt/chamvi/node', '/opt/chamvi/toolbox.mjs']);
    expect(program!.startsWith('/')).toBe(true);
    expect(bundle!.startsWith('/')).toBe(true);
  });

  it("names the node a custom image's init container copies into /opt/chamvi", () => {
    const pod = buildSandboxPod(parsedRun({ image: 'python:3.12', env: venvPath }), config);
    const init = pod.spec!.initContainers![0]!;
    expect(init.command).toEqual(['cp', config.sandboxNodePath, '/opt/chamvi/toolbox.mjs', '/chamvi-tools/']);
    const tools = pod.spec!.containers[0]!.volumeMounts!.find((mount) => mount.name === init.volumeMounts![0]!.name);
    // cp keeps the base name: sandboxNodePath's `node` lands at /opt/chamvi/node.
    expect(`${tools!.mountPath}/${config.sandboxNodePath.split('/').pop()}`).toBe(program);
  });

  it('names the node the default sandbox image links at /opt/chamvi/node', () => {
    const dockerfile = readFileSync(new URL('../../sandbox-image/Dockerfile', import.meta.url), 'utf8');
    expect(dockerfile).toMatch(/ln -s "\$\(command -v node\)" \/opt\/chamvi\/node/);
  });
});
