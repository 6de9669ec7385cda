// A size as the workers' messages say it: the unit a reader takes in at once, and the exact
// figure beside it, to compare with the setting it came from (maxCheckoutBytes, maxGitMemoryBytes).
export function formatBytes(bytes: number): string {
  const units = ['bytes', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return unit === 0 ? `${bytes} bytes` : `${value.toFixed(1)} ${units[unit]} (${bytes} bytes)`;
}
