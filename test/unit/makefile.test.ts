// The Makefile and its mk/ fragments as make reads them. make expands a rule's prerequisites
// when it reads the rule, so a variable a fragment uses there must already be defined: read
// in the wrong order, a target silently loses its prerequisites (bench-exec once ran without
// the toolbox bundle it measures). This asks make itself (-p: its database, -q: run nothing).
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const root = new URL('../../', import.meta.url).pathname;

function database(): string {
  // make -q exits 1 when something is out of date: the database is printed all the same.
  try {
    return execFileSync('make', ['-pq', '--no-print-directory', 'help'], {
      cwd: root,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    });
  } catch (error) {
    return String((error as { stdout?: string }).stdout ?? '');
  }
}

const makeDatabase = database();

/** The value make gives a variable after reading every file. */
function variable(name: string): string | undefined {
  return new RegExp(`^${name} :?= (.*)$`, 'm').exec(makeDatabase)?.[1];
}

/** The prerequisites make holds for a target. */
function prerequisites(target: string): string[] {
  const line = new RegExp(`^${target.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}:(.*)$`, 'm').exec(makeDatabase)?.[1];
  if (line === undefined) throw new Error(`make knows no target ${target}`);
  return line.split('|')[0]!.trim().split(/\s+/).filter(Boolean);
}

/** Rules written with a $(VARIABLE) among their prerequisites, in the Makefile and every fragment. */
function rulesUsingVariables(): Array<{ file: string; target: string; name: string }> {
  const files = [
    'Makefile',
    ...readdirSync(new URL('../../mk/', import.meta.url))
      .filter((file) => file.endsWith('.mk'))
      .map((file) => `mk/${file}`),
  ];
  const rules: Array<{ file: string; target: string; name: string }> = [];
  for (const file of files) {
    for (const line of readFileSync(`${root}${file}`, 'utf8').split('\n')) {
      const rule = /^([A-Za-z0-9_.-]+):(?!=)([^#]*)/.exec(line);
      if (!rule) continue;
      for (const [, name] of rule[2]!.matchAll(/\$\(([A-Z_]+)\)/g)) rules.push({ file, target: rule[1]!, name: name! });
    }
  }
  return rules;
}

describe('the Makefile and mk/ fragments', () => {
  it('include every fragment in mk/ (a fragment left out loses its targets: make release once did)', () => {
    const included = variable('MAKEFILE_LIST')?.split(/\s+/) ?? [];
    const fragments = readdirSync(`${root}mk`).filter((file) => file.endsWith('.mk'));
    expect(fragments.filter((file) => !included.includes(`mk/${file}`))).toEqual([]);
  });

  it('give bench-exec the toolbox bundle and the control plane it measures', () => {
    expect(prerequisites('bench-exec')).toEqual(
      expect.arrayContaining(['sandbox-image/dist/toolbox.mjs', 'control-plane', 'node_modules']),
    );
  });

  it('define every variable a rule names among its prerequisites before make reads that rule', () => {
    const rules = rulesUsingVariables();
    expect(rules.length).toBeGreaterThan(2);
    const lost = rules
      .filter(({ target, name }) => {
        const value = variable(name);
        return (
          value === undefined ||
          !value
            .trim()
            .split(/\s+/)
            .every((word) => prerequisites(target).includes(word))
        );
      })
      .map(({ file, target, name }) => `${file}: ${target} lost $(${name})`);
    expect(lost).toEqual([]);
  });
});
