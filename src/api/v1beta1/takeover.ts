// spec.takeover: the device plugin already serving the config's resource name, which the operator hands
// each node over from, through the rollout machinery (ADR 0012, docs/takeover.md).
import { z } from "zod";
import { celRules } from "./cel.crd.js";
import { DNS_SUBDOMAIN } from "./fields.js";

/** A namespace name: an RFC 1123 label. */
const NAMESPACE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/**
 * A socket file name in the kubelet's device-plugins directory, `*` matching any run of characters: no
 * path separator. The kubelet's own socket never counts (registration/standby.ts).
 */
const SOCKET_GLOB = /^[A-Za-z0-9_.*-]+$/;

export const TAKEOVER_DEVICE_IDS = ["Same", "Different"] as const;
export type TakeoverDeviceIds = (typeof TAKEOVER_DEVICE_IDS)[number];

export const TakeoverSchema = z
  .object({
    daemonSet: z
      .object({
        namespace: z
          .string()
          .min(1)
          .max(63)
          .regex(NAMESPACE, "must be a namespace name (lowercase alphanumerics and '-')")
          .describe("The namespace of the incumbent plugin's DaemonSet."),
        name: z
          .string()
          .min(1)
          .max(253)
          .regex(DNS_SUBDOMAIN, "must be a DaemonSet name (a lowercase DNS subdomain)")
          .describe("The name of the incumbent plugin's DaemonSet."),
      })
      .strict()
      .describe(
        "The DaemonSet of the plugin that serves the resource now. The operator sets its update strategy to OnDelete and its pods' node affinity so that it leaves each node as dpo's plugin takes it over, and gives both back when the takeover is rolled back or the config is deleted.",
      )
      .meta(
        celRules({ rule: "self == oldSelf", message: "is immutable: delete the config and create another" }),
      ),
    socket: z
      .string()
      .min(1)
      .max(128)
      .regex(SOCKET_GLOB, "must be a file name, '*' matching any characters, e.g. nvidia-gpu.sock or dp.*")
      .optional()
      .describe(
        "The file name of the incumbent's socket in the kubelet's device-plugins directory ('*' matches any characters). On kubelets before v1.37, which keep one registration per resource, dpo's plugin starts beside the incumbent and registers the moment this socket is gone; without it, those nodes are handed over as strategy Replace does, with a gap.",
      ),
    deviceIds: z
      .enum(TAKEOVER_DEVICE_IDS)
      .default("Different")
      .describe(
        "Same: dpo's backend advertises each device under the id the incumbent gives it (see docs/takeover.md for each backend), so pods that keep running keep their devices and a node is handed over whatever runs there. Different: a node is handed over only once no running pod on it holds the resource, and the status names the nodes that wait.",
      ),
  })
  .strict();

export type Takeover = z.infer<typeof TakeoverSchema>;
