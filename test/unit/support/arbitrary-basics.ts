// What every arbitrary of the API's objects shares: whether to draw invalid values, and how.
import fc from "fast-check";

export interface Options {
  /** Also draw values the schemas refuse. */
  invalid: boolean;
}

/** A valid value, or about one time in twelve one of the invalid ones when allowed. */
export function pick<T>(o: Options, valid: fc.Arbitrary<T>, ...invalid: T[]): fc.Arbitrary<T> {
  if (!o.invalid || invalid.length === 0) return valid;
  return fc.oneof({ arbitrary: valid, weight: 11 }, { arbitrary: fc.constantFrom(...invalid), weight: 1 });
}

/** A record whose keys are each present or absent. */
export function partial<T extends Record<string, unknown>>(arbs: { [K in keyof T]: fc.Arbitrary<T[K]> }) {
  return fc.record(arbs, { requiredKeys: [] });
}
