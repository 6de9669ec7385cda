// Shared by the toolbox (glob, list_files, protected paths) and the operator (which files of a clone are protected).
// Matches a glob against a whole '/'-separated relative path: `**` spans any number of
// directories (`**/` at the start of a segment: zero or more whole directories), `*` and `?`
// stay inside one segment, `[...]` is a character class (`[!...]` or `[^...]` negated) and
// `{a,b}` an alternation. Nothing is special about dotfiles, a class may match `/`, and `**`
// crosses every character, line breaks included (the RegExp this replaces did not, so
// `test/**` let a model's `test/a\nb.js` through); a character is a code point.
//
// With `escapes` (the glob tool), a backslash makes the next character literal, as in git's and
// most shells' globs: `app/\[id\]/page.tsx` names that file, which `[id]` (a class) cannot.
// Without it (spec.verify.protect), a backslash is an ordinary character, as it always was, so a
// run author's glob keeps its meaning. A glob with no backslash means the same either way.
//
// The glob becomes a Thompson automaton run over the path one character at a time with the set
// of states it may be in, so a match costs at most (path length × glob length), whatever the
// glob. A backtracking RegExp cannot promise that: `^.*.*.*…X$` took minutes on one short path,
// and the operator matches spec.verify.protect (the run author's) on every file of a clone.
import { InvalidGlobError } from './invalid-glob-error.ts';

/** A compiled glob; `test` answers whether a whole relative path matches. */
export interface GlobMatcher {
  test(path: string): boolean;
}

const ACCEPT = 0;
/** No character: goes on to every state in `outs` and to `next`. */
const SPLIT = 1;
const LITERAL = 2;
const NOT_SLASH = 3;
const ANY = 4;
const CLASS = 5;

const SLASH = 0x2f;

interface CharClass {
  negated: boolean;
  /** Inclusive code point ranges, as [low, high] pairs. */
  ranges: number[];
}

interface State {
  kind: number;
  /** The state after this one (-1 while the fragment's continuation is not known yet). */
  next: number;
  outs: number[];
  codePoint: number;
  charClass: CharClass | undefined;
}

/** Part of the automaton: where it starts, and the states whose `next` its continuation fills. */
interface Fragment {
  start: number;
  exits: number[];
}

export interface GlobOptions {
  /** A backslash makes the next character literal (default false: a backslash is itself). */
  escapes?: boolean;
}

/** Compiles a glob; throws InvalidGlobError for one that names no set of paths. */
export function compileGlob(glob: string, options: GlobOptions = {}): GlobMatcher {
  const automaton = buildAutomaton(glob, options.escapes ?? false);
  return { test: (path) => runAutomaton(automaton, path) };
}

/**
 * A set of states the automaton may be in, with the sets it goes to on each character seen so
 * far: a lazily built DFA, so a path costs one lookup per character once its sets are known.
 */
interface SetOfStates {
  /** Sorted indexes of the character-taking and accepting states. */
  states: number[];
  accepting: boolean;
  /** By character code below 128 (most paths are ASCII), then by code point. */
  ascii: Array<SetOfStates | undefined> | undefined;
  other: Map<number, SetOfStates>;
}

/** Remembered states and transitions, in all sets together, before they are dropped and found again. */
const MEMORY_BUDGET = 32_768;

interface Automaton {
  states: State[];
  start: SetOfStates;
  sets: Map<string, SetOfStates>;
  memory: number;
  /** Scratch for `following`: the step in which each state was last added to a set. */
  marks: Uint32Array;
  step: number;
}

function buildAutomaton(glob: string, escapes: boolean): Automaton {
  const states: State[] = [];
  const add = (kind: number, fields: Partial<State> = {}): number => {
    states.push({ kind, next: -1, outs: [], codePoint: -1, charClass: undefined, ...fields });
    return states.length - 1;
  };
  const single = (kind: number, fields: Partial<State> = {}): Fragment => {
    const state = add(kind, fields);
    return { start: state, exits: [state] };
  };
  // `[^/]*` or `.*`: a split that either takes one more character and comes back, or goes on.
  const loop = (kind: number): Fragment => {
    const split = add(SPLIT);
    const take = add(kind, { next: split });
    states[split]!.outs.push(take);
    return { start: split, exits: [split] };
  };
  // `(?:[^/]+/)*`: zero or more whole directories.
  const directories = (): Fragment => {
    const before = add(SPLIT);
    const name = add(NOT_SLASH);
    const slash = add(LITERAL, { codePoint: SLASH, next: before });
    const inName = add(SPLIT, { outs: [name], next: slash });
    states[name]!.next = inName;
    states[before]!.outs.push(name);
    return { start: before, exits: [before] };
  };

  // The sequence being built, and one frame per open `{` (iterative: a deep nesting must not
  // overflow the stack).
  let sequence: Fragment = { start: -1, exits: [] };
  const groups: Array<{ outer: Fragment; alternatives: Fragment[] }> = [];
  const append = (fragment: Fragment) => {
    if (sequence.start === -1) sequence.start = fragment.start;
    else for (const exit of sequence.exits) states[exit]!.next = fragment.start;
    sequence.exits = fragment.exits;
  };
  const finished = (): Fragment => (sequence.start === -1 ? single(SPLIT) : sequence);

  for (let index = 0; index < glob.length; index += 1) {
    const char = glob[index] as string;
    if (char === '*') {
      if (glob[index + 1] === '*') {
        const atSegmentStart = index === 0 || glob[index - 1] === '/';
        index += 1;
        if (atSegmentStart && glob[index + 1] === '/') {
          index += 1;
          append(directories());
        } else {
          append(loop(ANY));
        }
      } else {
        append(loop(NOT_SLASH));
      }
    } else if (char === '?') {
      append(single(NOT_SLASH));
    } else if (char === '[' && classEnd(glob, index, escapes) !== -1) {
      const close = classEnd(glob, index, escapes);
      append(single(CLASS, { charClass: parseClass(glob, glob.slice(index + 1, close), escapes) }));
      index = close;
    } else if (char === '\\' && escapes) {
      if (index + 1 === glob.length) {
        throw new InvalidGlobError(glob, 'ends with a \\ that escapes nothing: leave it out, or write \\\\ for a backslash');
      }
      const codePoint = glob.codePointAt(index + 1)!;
      index += codePoint > 0xffff ? 2 : 1;
      append(single(LITERAL, { codePoint }));
    } else if (char === '{') {
      groups.push({ outer: sequence, alternatives: [] });
      sequence = { start: -1, exits: [] };
    } else if (char === ',' && groups.length > 0) {
      groups.at(-1)!.alternatives.push(finished());
      sequence = { start: -1, exits: [] };
    } else if (char === '}' && groups.length > 0) {
      const group = groups.pop()!;
      group.alternatives.push(finished());
      sequence = group.outer;
      const split = add(SPLIT, { outs: group.alternatives.map((alternative) => alternative.start) });
      append({ start: split, exits: group.alternatives.flatMap((alternative) => alternative.exits) });
    } else {
      const codePoint = glob.codePointAt(index)!;
      if (codePoint > 0xffff) index += 1;
      append(single(LITERAL, { codePoint }));
    }
  }
  if (groups.length > 0) {
    throw new InvalidGlobError(glob, 'opens a { it never closes: close the alternation, such as {unit,e2e}, or leave out the {');
  }
  const whole = finished();
  const accept = add(ACCEPT);
  for (const exit of whole.exits) states[exit]!.next = accept;
  const automaton: Automaton = {
    states,
    start: { states: [], accepting: false, ascii: undefined, other: new Map() },
    sets: new Map(),
    memory: 0,
    marks: new Uint32Array(states.length),
    step: 1,
  };
  const reached: number[] = [];
  addReachable(automaton, whole.start, reached, []);
  automaton.start = remembered(automaton, reached, undefined, 0);
  return automaton;
}

/**
 * Where the class opening at `open` closes: the first `]` after the character following the
 * `[` (so `[]a]` holds `]` and `a`), past escaped characters with `escapes`; -1 if none, and the
 * `[` is then a literal.
 */
function classEnd(glob: string, open: number, escapes: boolean): number {
  if (!escapes) return glob.indexOf(']', open + 2);
  for (let index = open + 1; index < glob.length; index += 1) {
    if (glob[index] === '\\') index += 1;
    else if (glob[index] === ']' && index >= open + 2) return index;
  }
  return -1;
}

/**
 * The body of `[...]`: a leading `!` or `^` negates it, `a-z` is a range, anything else stands
 * for itself; with `escapes`, `\x` is x and never negates or makes a range.
 */
function parseClass(glob: string, body: string, escapes: boolean): CharClass {
  const members: number[] = [];
  const escaped: boolean[] = [];
  for (let index = 0; index < body.length; index += 1) {
    const isEscape = escapes && body[index] === '\\' && index + 1 < body.length;
    if (isEscape) index += 1;
    const codePoint = body.codePointAt(index)!;
    if (codePoint > 0xffff) index += 1;
    members.push(codePoint);
    escaped.push(isEscape);
  }
  const negated = !escaped[0] && (members[0] === 0x21 || members[0] === 0x5e);
  const first = negated ? 1 : 0;
  const ranges: number[] = [];
  for (let index = first; index < members.length;) {
    const low = members[index]!;
    const high = members[index + 2];
    if (members[index + 1] === 0x2d && !escaped[index + 1] && high !== undefined) {
      if (low > high) {
        const range = `${String.fromCodePoint(low)}-${String.fromCodePoint(high)}`;
        throw new InvalidGlobError(glob, `has the range ${range} written backwards: put the lower character first, such as [a-z]`);
      }
      ranges.push(low, high);
      index += 3;
    } else {
      ranges.push(low, low);
      index += 1;
    }
  }
  return { negated, ranges };
}

function classHas(charClass: CharClass, codePoint: number): boolean {
  const { ranges } = charClass;
  let found = false;
  for (let index = 0; index < ranges.length && !found; index += 2) {
    found = codePoint >= ranges[index]! && codePoint <= ranges[index + 1]!;
  }
  return found !== charClass.negated;
}

function takes(state: State, codePoint: number): boolean {
  switch (state.kind) {
    case LITERAL:
      return codePoint === state.codePoint;
    case NOT_SLASH:
      return codePoint !== SLASH;
    case ANY:
      return true;
    case CLASS:
      return classHas(state.charClass!, codePoint);
    default:
      return false;
  }
}

/** Adds `from` and every state reachable from it without a character (each once per step). */
function addReachable(automaton: Automaton, from: number, into: number[], stack: number[]): void {
  const { states, marks, step } = automaton;
  stack.push(from);
  while (stack.length > 0) {
    const index = stack.pop()!;
    if (marks[index] === step) continue;
    marks[index] = step;
    const state = states[index]!;
    if (state.kind === SPLIT) {
      for (const out of state.outs) stack.push(out);
      if (state.next !== -1) stack.push(state.next);
    } else {
      into.push(index);
    }
  }
}

/** The set of states `from` reaches on `codePoint`, found once and then remembered. */
function following(automaton: Automaton, from: SetOfStates, codePoint: number): SetOfStates {
  automaton.step += 1;
  if (automaton.step === 0xffffffff) {
    automaton.marks.fill(0);
    automaton.step = 1;
  }
  const reached: number[] = [];
  const stack: number[] = [];
  for (const index of from.states) {
    const state = automaton.states[index]!;
    if (takes(state, codePoint)) addReachable(automaton, state.next, reached, stack);
  }
  return remembered(automaton, reached, from, codePoint);
}

function remembered(automaton: Automaton, reached: number[], from: SetOfStates | undefined, codePoint: number): SetOfStates {
  reached.sort((a, b) => a - b);
  const key = reached.join(',');
  if (automaton.memory > MEMORY_BUDGET) forget(automaton);
  let set = automaton.sets.get(key);
  if (set === undefined) {
    const accepting = reached.some((index) => automaton.states[index]!.kind === ACCEPT);
    set = { states: reached, accepting, ascii: undefined, other: new Map() };
    automaton.sets.set(key, set);
    automaton.memory += reached.length;
  }
  if (from === undefined) return set;
  if (codePoint < 128) {
    if (from.ascii === undefined) {
      from.ascii = new Array<SetOfStates | undefined>(128).fill(undefined);
      automaton.memory += 128;
    }
    from.ascii[codePoint] = set;
  } else {
    from.other.set(codePoint, set);
    automaton.memory += 1;
  }
  return set;
}

/** Drops every remembered set but the start, so memory stays bounded whatever the paths. */
function forget(automaton: Automaton): void {
  for (const set of automaton.sets.values()) {
    set.ascii = undefined;
    set.other.clear();
  }
  automaton.sets.clear();
  automaton.sets.set(automaton.start.states.join(','), automaton.start);
  automaton.memory = automaton.start.states.length;
}

function runAutomaton(automaton: Automaton, path: string): boolean {
  let current = automaton.start;
  for (let index = 0; index < path.length && current.states.length > 0; index += 1) {
    const code = path.charCodeAt(index);
    if (code < 128) {
      current = current.ascii?.[code] ?? following(automaton, current, code);
    } else {
      const codePoint = path.codePointAt(index)!;
      if (codePoint > 0xffff) index += 1;
      current = current.other.get(codePoint) ?? following(automaton, current, codePoint);
    }
  }
  return current.accepting;
}
