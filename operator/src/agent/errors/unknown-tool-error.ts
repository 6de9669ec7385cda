// spec.tools.allow (or approval.tools) names a tool the toolbox does not define. The API
// schema should already refuse this; the agent checks again because a model must never be
// offered a tool nobody can execute.

const name = 'UnknownToolError';
const symbol = Symbol.for(`chamvi.error.${name}`);

export class UnknownToolError extends Error {
  private readonly [symbol] = true;
  override readonly name = name;
  readonly toolNames: readonly string[];

  constructor(toolNames: readonly string[], known: readonly string[]) {
    super(`spec.tools.allow names tool(s) the toolbox does not define: ${toolNames.join(', ')}. Use only: ${known.join(', ')}.`);
    this.toolNames = toolNames;
  }

  static isInstance(error: unknown): error is UnknownToolError {
    return typeof error === 'object' && error !== null && (error as Record<symbol, unknown>)[symbol] === true;
  }
}
