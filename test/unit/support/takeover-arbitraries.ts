// fast-check arbitraries of spec.takeover, the same shape in both API versions (api-arbitraries.ts).
import fc from "fast-check";
import { pick, type Options } from "./arbitrary-basics.js";

/** spec.takeover: the same shape in both versions. */
export const takeover = (o: Options) =>
  fc.record(
    {
      daemonSet: fc.record({
        namespace: pick(o, fc.constantFrom("kube-system", "gpu-operator"), "Kube_System"),
        name: pick(o, fc.constantFrom("nvidia-device-plugin-daemonset", "sample.plugin"), "Bad Name"),
      }),
      socket: pick(o, fc.constantFrom("nvidia-gpu.sock", "dp.*"), "a/b", "kubelet.sock"),
      deviceIds: fc.constantFrom("Same" as const, "Different" as const),
    },
    { requiredKeys: ["daemonSet"] },
  );
