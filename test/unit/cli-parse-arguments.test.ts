// The plugin's command line: flags in kubectl's spelling anywhere on the line, and usage
// errors (exit 2) that name what is wrong and which command's --help explains it.
import { describe, expect, it } from 'vitest';
import { UsageError } from '../../operator/src/cli/errors/usage-error.ts';
import { parseArguments } from '../../operator/src/cli/parse-arguments.ts';

const usageError = (argv: string[]): UsageError => {
  try {
    parseArguments(argv);
  } catch (error) {
    if (UsageError.isInstance(error)) return error;
    throw error;
  }
  throw new Error(`${argv.join(' ')} parsed without error`);
};

describe('parseArguments', () => {
  it('reads logs: -f follows (as kubectl logs -f), --step and -o json; run keeps -f FILE', () => {
    expect(parseArguments(['logs', 'fix-bug', '-f', '--step', '3', '-o', 'json', '-n', 'agents'])).toEqual({
      command: 'logs',
      name: 'fix-bug',
      follow: true,
      step: 3,
      output: 'json',
      namespace: 'agents',
    });
    expect(parseArguments(['-n', 'agents', 'logs', 'fix-bug'])).toEqual({
      command: 'logs',
      name: 'fix-bug',
      follow: false,
      output: 'text',
      namespace: 'agents',
    });
    expect(parseArguments(['run', '-f', 'run.yaml', '--local'])).toMatchObject({ command: 'run', file: 'run.yaml' });
    expect(usageError(['logs', 'x', '-o', 'yaml']).message).toMatch(/-o must be json/);
    expect(usageError(['logs', 'x', '--step', 'two']).message).toMatch(/--step must be a step number/);
    expect(usageError(['logs']).message).toMatch(/logs needs the name of a CodingRun/);
    expect(usageError(['get', 'x', '--follow']).message).toMatch(/--follow does not apply to get/);
  });

  // A flag's value that spells a command is not the command: a namespace called eval or logs.
  it.each([
    [['-n', 'eval', 'logs', 'r', '-f'], { command: 'logs', name: 'r', follow: true, output: 'text', namespace: 'eval' }],
    [['-n', 'logs', 'run', '-f', 'run.yaml', '--local'], { command: 'run', file: 'run.yaml', local: true, namespace: 'logs' }],
    [
      ['--namespace', 'logs', '--kubeconfig=/tmp/kc', '-nlogs', 'logs', 'r', '-f'],
      { command: 'logs', name: 'r', follow: true, output: 'text', namespace: 'logs', kubeconfig: '/tmp/kc' },
    ],
  ])('takes the command from %j, not from a flag value that names one', (argv, command) => {
    expect(parseArguments(argv)).toEqual(command);
  });

  it('reads get with a name, watch and namespace in any order and spelling', () => {
    expect(parseArguments(['get', 'fix-bug', '-w', '-n', 'agents'])).toEqual({
      command: 'get',
      name: 'fix-bug',
      watch: true,
      allNamespaces: false,
      namespace: 'agents',
    });
    expect(parseArguments(['--namespace=agents', 'get', '--watch'])).toEqual({
      command: 'get',
      watch: true,
      allNamespaces: false,
      namespace: 'agents',
    });
    expect(parseArguments(['-nagents', 'get'])).toMatchObject({ namespace: 'agents' });
  });

  it('reads the connection flags', () => {
    expect(parseArguments(['diff', 'x', '--kubeconfig', '/tmp/kc', '--context', 'prod'])).toEqual({
      command: 'diff',
      name: 'x',
      kubeconfig: '/tmp/kc',
      context: 'prod',
    });
  });

  it('reads approve with an optional id and reason, deny with its required reason', () => {
    expect(parseArguments(['approve', 'run-1'])).toEqual({ command: 'approve', name: 'run-1' });
    expect(parseArguments(['approve', 'run-1', '--id', 's3-c1', '--reason', 'looks fine'])).toEqual({
      command: 'approve',
      name: 'run-1',
      id: 's3-c1',
      reason: 'looks fine',
    });
    expect(parseArguments(['deny', 'run-1', '--reason', 'no network'])).toEqual({ command: 'deny', name: 'run-1', reason: 'no network' });
  });

  it('reads --uid, the run the answer is meant for, on approve and deny only', () => {
    const sha256 = 'a'.repeat(64);
    expect(parseArguments(['approve', 'run-1', '--id', 's1-c1', '--sha256', sha256, '--uid', '6f1c-42'])).toEqual({
      command: 'approve',
      name: 'run-1',
      id: 's1-c1',
      sha256,
      uid: '6f1c-42',
    });
    expect(parseArguments(['deny', 'run-1', '--reason', 'no', '--uid=6f1c-42'])).toEqual({
      command: 'deny',
      name: 'run-1',
      reason: 'no',
      uid: '6f1c-42',
    });
    expect(() => parseArguments(['cancel', 'run-1', '--uid', '6f1c-42'])).toThrow(/--uid does not apply to cancel/);
    expect(() => parseArguments(['approve', 'run-1', '--uid'])).toThrow(/--uid needs a value/);
  });

  it('reads cancel with an optional reason, and refuses it without a NAME', () => {
    expect(parseArguments(['cancel', 'run-1'])).toEqual({ command: 'cancel', name: 'run-1' });
    expect(parseArguments(['cancel', 'run-1', '--reason', 'wrong branch', '-n', 'agents'])).toEqual({
      command: 'cancel',
      name: 'run-1',
      reason: 'wrong branch',
      namespace: 'agents',
    });
    expect(() => parseArguments(['cancel'])).toThrow(/needs the name of a CodingRun/);
  });

  it('takes everything after -- as arguments', () => {
    expect(parseArguments(['diff', '--', '-odd-name'])).toMatchObject({ command: 'diff', name: '-odd-name' });
  });

  it('answers --help for the whole plugin and for each command', () => {
    expect(parseArguments(['--help'])).toEqual({ command: 'help' });
    expect(parseArguments(['-h'])).toEqual({ command: 'help' });
    expect(parseArguments(['deny', '--help'])).toEqual({ command: 'help', topic: 'deny' });
    expect(parseArguments(['help', 'diff'])).toEqual({ command: 'help', topic: 'diff' });
    // --help wins over a missing required flag, so a user can always read how to call it.
    expect(parseArguments(['deny', 'x', '-h'])).toEqual({ command: 'help', topic: 'deny' });
  });

  it.each([
    [[], /no command given/, undefined],
    [['approve'], /approve needs the name of a CodingRun/, 'approve'],
    [['deny', 'x'], /deny needs --reason/, 'deny'],
    [['deny', 'x', '--reason'], /--reason needs a value/, 'deny'],
    [['diff', 'a', 'b'], /unexpected argument "b"/, 'diff'],
    [['frobnicate'], /unknown command "frobnicate"/, undefined],
    [['get', '--bogus'], /unknown flag --bogus/, 'get'],
    [['get', '-x'], /unknown flag -x/, 'get'],
    [['diff', 'x', '-w'], /--watch does not apply to diff/, 'diff'],
    [['get', 'x', '-A'], /--all-namespaces/, 'get'],
    [['get', '--watch=yes'], /--watch takes no value/, 'get'],
    [['run', '--local'], /run needs -f FILE/, 'run'],
  ])('refuses %j with a usage error (exit 2) naming the problem', (argv, message, command) => {
    const error = usageError(argv);
    expect(error.message).toMatch(message);
    expect(error.exitCode).toBe(2);
    expect(error.command).toBe(command);
  });
});
