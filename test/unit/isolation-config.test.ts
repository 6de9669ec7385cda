// Security #11.8: the operator config keys of the isolation check. Unisolated sandboxes are
// off unless an admin says so, and the probe target, which becomes part of a shell command
// in the probe pod, is host:port and nothing else.
import { describe, expect, it } from 'vitest';
import { loadOperatorConfig } from '../../operator/src/config/operator-config.ts';

describe('security #11.8 isolation config', () => {
  it('refuses unisolated sandboxes by default, and probes with bounded defaults', () => {
    const config = loadOperatorConfig(undefined, {});
    expect(config.allowUnisolatedSandboxes).toBe(false);
    expect(config.isolationProbe).toEqual({ maxAgeSeconds: 600, settleSeconds: 10, timeoutSeconds: 180 });
  });

  it('takes the opt-in from the file or CHAMVI_ALLOW_UNISOLATED_SANDBOXES, and only true or false', () => {
    expect(loadOperatorConfig({ allowUnisolatedSandboxes: true }, {}).allowUnisolatedSandboxes).toBe(true);
    expect(
      loadOperatorConfig({ allowUnisolatedSandboxes: true }, { CHAMVI_ALLOW_UNISOLATED_SANDBOXES: 'false' }).allowUnisolatedSandboxes,
    ).toBe(false);
    expect(() => loadOperatorConfig(undefined, { CHAMVI_ALLOW_UNISOLATED_SANDBOXES: 'yes' })).toThrow(
      /allowUnisolatedSandboxes .*must be true or false/,
    );
  });

  it.each(['10.0.0.5:8080', 'chamvi-operator-metrics.chamvi-system.svc:8080', '[fd00::5]:8080', 'localhost:1'])(
    'accepts the probe target %s',
    (target) => {
      expect(loadOperatorConfig({ isolationProbe: { target } }, {}).isolationProbe.target).toBe(target);
    },
  );

  it.each(['10.0.0.5', '10.0.0.5:80;curl evil', '$(id):80', 'host name:80', 'fd00::5:8080', 'http://10.0.0.5:8080', '-x:80'])(
    'refuses the probe target %j, naming the key',
    (target) => {
      expect(() => loadOperatorConfig({ isolationProbe: { target } }, {})).toThrow(/config key isolationProbe\.target: must be host:port/);
    },
  );

  it('refuses an unknown isolationProbe key', () => {
    expect(() => loadOperatorConfig({ isolationProbe: { settle: 3 } }, {})).toThrow(/isolationProbe/);
  });
});
