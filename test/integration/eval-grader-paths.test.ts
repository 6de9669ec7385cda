// A CodingEval's grader paths on a real API server: the CRD's CEL refuses a path no diff can
// hold (`test/`, `./x`, `a//b`, `a/../b`), naming the field and saying what to write, so a
// file-unchanged grader on it (which could never fail) is caught at `kubectl apply`; the
// operator's own parse refuses the same paths (test/unit/coding-eval-crd.test.ts).
import { beforeAll, describe, expect, it } from 'vitest';
import { stringify } from 'yaml';
import { parseEvalSpec } from '../../operator/src/evals/parse-eval.ts';
import { createNamespace, kubectl } from '../support/cluster.ts';

const NAMESPACE = 'eval-grader-paths-test';

const evaluation = (name: string, path: string) => ({
  apiVersion: 'chamvi.dev/v1alpha1',
  kind: 'CodingEval',
  metadata: { name, namespace: NAMESPACE },
  spec: {
    tasks: [
      {
        name: 'fix',
        task: 'Fix it.',
        repository: { url: 'https://github.com/acme/webapp.git' },
        graders: [{ type: 'file-unchanged' as const, path }],
      },
    ],
    models: [{ name: 'm', model: { provider: 'openai' as const, name: 'gpt-5.6', apiKeySecretRef: { name: 'llm' } } }],
    attempts: 1,
  },
});

const apply = (manifest: object) => kubectl(['apply', '--dry-run=server', '-f', '-'], { input: stringify(manifest) });

beforeAll(async () => {
  await createNamespace(NAMESPACE);
});

describe('grader paths on a real API server', () => {
  it.each(['test/', './package.json', 'test//unit', 'src/../package.json', 'a/./b', '.', '..'])(
    'refuses %j at apply, naming the field and what to write',
    async (path) => {
      const result = await apply(evaluation('refused', path));
      expect(result.code).not.toBe(0);
      expect(result.stderr).toMatch(
        /spec\.tasks\[0\]\.graders\[0\]\.path: Invalid value: .*without \.\/, \/\/, \. or \.\. segments or a trailing \//,
      );
      expect(parseEvalSpec(evaluation('refused', path)).ok).toBe(false);
    },
  );

  it.each(['test', 'package.json', 'test/unit/a.test.js', '.github/workflows', '..hidden'])('accepts %j', async (path) => {
    const result = await apply(evaluation('accepted', path));
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
    expect(parseEvalSpec(evaluation('accepted', path)).ok).toBe(true);
  });
});
