// Reading a Dockerfile without a Docker engine: its instructions, with build arguments
// replaced by their defaults (FROM ${BASE_IMAGE} names the public image users pull; a local
// build passes its own base).

/** The lines of one instruction (`FROM`, `RUN`, ...), with `${ARG}` resolved to the ARG's default. */
export function dockerfileInstructions(text: string, name: string): string[] {
  const lines = text.split('\n');
  const args = new Map(lines.flatMap((line) => [...line.matchAll(/^ARG (\w+)=(\S+)$/g)].map((m) => [m[1]!, m[2]!] as const)));
  return lines
    .filter((line) => line.startsWith(`${name} `))
    .map((line) => line.replace(/\$\{(\w+)\}/g, (whole, arg: string) => args.get(arg) ?? whole));
}
