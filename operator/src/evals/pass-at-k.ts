// pass@k, the unbiased estimator of Chen et al. (2021): with n attempts of which c passed, the
// chance that at least one of k attempts drawn without replacement passes,
// 1 - C(n-c, k) / C(n, k), computed as a product so large n cannot overflow. Pure.

export function passAtK(n: number, c: number, k: number): number {
  if (k < 1 || k > n || c < 0 || c > n) throw new RangeError(`pass@k needs 1 <= k <= n and 0 <= c <= n, got n=${n} c=${c} k=${k}`);
  if (n - c < k) return 1;
  // C(n-c, k) / C(n, k) = prod_{i=n-c+1}^{n} (1 - k / i)
  let fail = 1;
  for (let i = n - c + 1; i <= n; i++) fail *= 1 - k / i;
  return 1 - fail;
}
