// fast-check arbitraries of spec.backend.nvidia.mig (api-arbitraries.ts).
import fc from "fast-check";
import { partial, pick, type Options } from "./arbitrary-basics.js";

/** A profile only with strategy Mixed; with `invalid` also a profile beside Single and bad values. */
export const migMember = (o: Options) =>
  fc.oneof(
    partial({ strategy: pick(o, fc.constantFrom("None", "Single"), "none") }),
    fc.record(
      {
        strategy: fc.constant("Mixed"),
        profile: pick(
          o,
          fc.constantFrom("1g.10gb", "3g.40gb", "1g.10gb+me", "1c.3g.40gb"),
          "1g",
          "MIG 1g.10gb",
        ),
      },
      { requiredKeys: ["strategy"] },
    ),
    ...(o.invalid ? [fc.constant({ strategy: "Single", profile: "1g.10gb" })] : []),
  );
