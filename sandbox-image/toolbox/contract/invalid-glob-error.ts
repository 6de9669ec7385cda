// A glob that names no set of paths (an unclosed {, a range written backwards): refused where
// it is written (spec.verify.protect, the glob tool's pattern) with a message saying what to fix.
export class InvalidGlobError extends Error {
  override readonly name = 'InvalidGlobError';
  readonly glob: string;

  constructor(glob: string, problem: string) {
    super(`the glob ${JSON.stringify(glob.length > 200 ? `${glob.slice(0, 200)}…` : glob)} ${problem}`);
    this.glob = glob;
  }

  static isInstance(value: unknown): value is InvalidGlobError {
    return value instanceof InvalidGlobError;
  }
}
