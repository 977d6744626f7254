// Pure: what each suffix of a Kubernetes resource.Quantity multiplies its number by (binary Ki…Ei,
// decimal n…E). One table for every place that reads quantities: the kubelet's extended-resource
// counts in the operator's status and the capacities a DRA plugin publishes.
export const QUANTITY_SUFFIX_FACTOR: Readonly<Record<string, number>> = {
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
  Pi: 2 ** 50,
  Ei: 2 ** 60,
  n: 1e-9,
  u: 1e-6,
  m: 1e-3,
  k: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  P: 1e15,
  E: 1e18,
};

/**
 * A count from a resource quantity, as the kubelet writes extended resources ("4", and "2k" for 2000);
 * undefined when absent or not a whole number.
 */
export function parseCountQuantity(quantity: string | undefined): number | undefined {
  if (quantity === undefined) return undefined;
  const match = /^\+?(\d+(?:\.\d+)?)(?:[eE]([+-]?\d+)|(k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei))?$/.exec(
    quantity.trim(),
  );
  if (!match) return undefined;
  const [, mantissa, exponent, suffix] = match;
  const factor =
    exponent !== undefined
      ? 10 ** Number(exponent)
      : suffix !== undefined
        ? QUANTITY_SUFFIX_FACTOR[suffix]!
        : 1;
  const value = Number(mantissa) * factor;
  return Number.isSafeInteger(value) ? value : undefined;
}
