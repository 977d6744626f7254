// Builders for the leader election tests: the test's clock origin and a Lease record held by a given holder.
import { type LeaseRecord } from "../../../src/kube/index.js";

export const T0 = 1_700_000_000_000;
export const held = (holder: string, extra: Partial<LeaseRecord> = {}): LeaseRecord => ({
  holderIdentity: holder,
  leaseDurationSeconds: 15,
  acquireTime: T0 - 60_000,
  renewTime: T0 - 1_000,
  leaseTransitions: 3,
  ...extra,
});
