// The device plugin's /readyz answer: ready once registered; standing by, or not registered, says why.
import { describe, expect, it } from "vitest";
import { registrationReadiness } from "../../../src/cli/plugin.js";

describe("registrationReadiness", () => {
  it.each([
    {
      case: "registered",
      status: { serving: true, registered: true, lastRegistrationError: undefined },
      want: { ok: true, detail: "registered" },
    },
    {
      case: "not registered, with the last error",
      status: { serving: true, registered: false, lastRegistrationError: "kubelet.sock: connection refused" },
      want: { ok: false, detail: "not registered: kubelet.sock: connection refused" },
    },
    {
      case: "not serving",
      status: { serving: false, registered: false, lastRegistrationError: undefined },
      want: { ok: false, detail: "not registered" },
    },
    {
      case: "standing by for an older instance",
      status: {
        serving: true,
        registered: false,
        lastRegistrationError: undefined,
        standingBy: "/var/lib/kubelet/device-plugins/dpo-example.com_gpu-abc-1-1.sock",
      },
      want: {
        ok: false,
        detail:
          "standing by: /var/lib/kubelet/device-plugins/dpo-example.com_gpu-abc-1-1.sock serves the resource",
      },
    },
  ])("$case", ({ status, want }) => {
    expect(registrationReadiness(status)).toEqual(want);
  });
});
