// run --local runs the tools with the bundled toolbox, which `make toolbox` builds.
import { CliError } from './cli-error.ts';

export class ToolboxMissingError extends CliError {
  override readonly name = 'ToolboxMissingError';
  constructor(path: string) {
    super(
      `the toolbox bundle ${path} is missing: build it with make toolbox (in a checkout), or point CHAMVI_TOOLBOX_PATH at a toolbox.mjs`,
    );
  }
}
