// A Kubernetes resource quantity's value, for comparing a request with a limit ("512Mi" against
// "256Mi", "250m" against 4): by the schema's rule (kubernetes-names.ts requestWithinLimitRule)
// and when the sandbox pod merges the operator's defaults (reconcile/sandbox-pod.ts). Pure, and
// in api/ because the schema needs it. A float is enough: what is compared are sizes a pod may
// ask for, far within a double's exact range, and the schema has checked the syntax
// (kubernetes-names.ts `quantity`).

const BINARY: Record<string, number> = { Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60 };
const DECIMAL: Record<string, number> = { n: 1e-9, u: 1e-6, m: 1e-3, '': 1, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18 };
const SHAPE = /^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))?$/;

/** The quantity's value in its base unit (cores, bytes); undefined for what is not a quantity. */
export function quantityValue(quantity: string | number): number | undefined {
  if (typeof quantity === 'number') return quantity;
  const match = SHAPE.exec(quantity);
  if (!match) return undefined;
  const number = Number(match[1]);
  const suffix = match[2] ?? '';
  if (suffix in BINARY) return number * BINARY[suffix]!;
  if (suffix in DECIMAL) return number * DECIMAL[suffix]!;
  return number * 10 ** Number(suffix.slice(1));
}
