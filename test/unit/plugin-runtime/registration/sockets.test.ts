// Socket names: unique per start, one prefix per resource, and always short enough to be a unix socket path.
import { describe, expect, it } from "vitest";
import {
  MAX_SOCKET_PATH_BYTES,
  socketFileName,
  socketPath,
  socketPrefix,
} from "../../../../src/plugin-runtime/registration/sockets.js";

/** The longest resource name the API allows: a 253-character domain and a 63-character name. */
const longestDomain = [61, 61, 61, 61].map((n, i) => String.fromCharCode(97 + i).repeat(n)).join(".") + ".io";
const longestResource = `${longestDomain.slice(0, 253)}/${"n".repeat(63)}`;
const KUBELET_DIRS = ["/var/lib/kubelet/device-plugins", "/var/lib/kubelet/plugins_registry"];
/** Far-future start time and the largest pid Linux hands out. */
const WORST_START_MS = Date.UTC(2200, 0, 1);

describe("socketPrefix", () => {
  it.each([
    ["hardware-vendor.example/foo", "dpo-hardware-vendor.example_foo-"],
    ["a.example/b_c", "dpo-a.example_b_c-"],
  ])("keeps a short resource name readable: %s → %s", (resource, prefix) => {
    expect(socketPrefix(resource)).toBe(prefix);
  });

  it("cuts a long name and tells long names apart by a hash of the whole name", () => {
    const a = socketPrefix(`${longestDomain.slice(0, 253)}/first`);
    const b = socketPrefix(`${longestDomain.slice(0, 253)}/second`);
    expect(a).not.toBe(b);
    expect(a).toMatch(/^dpo-aaaa[a-z.]*~[0-9a-f]{8}-$/);
    expect(socketPrefix(`${longestDomain.slice(0, 253)}/first`)).toBe(a);
  });
});

describe("socket paths in the kubelet's directories", () => {
  it.each(KUBELET_DIRS)("fit a unix socket for the longest resource name in %s", (dir) => {
    for (const suffix of [".sock", "-reg.sock"]) {
      const name = socketFileName(socketPrefix(longestResource), WORST_START_MS, 9999, suffix);
      const path = socketPath(dir, name);
      expect(Buffer.byteLength(path)).toBeLessThanOrEqual(MAX_SOCKET_PATH_BYTES);
      expect(name.startsWith(socketPrefix(longestResource))).toBe(true);
    }
  });

  it("differ from one start to the next and from one socket to the next", () => {
    const prefix = socketPrefix("hardware-vendor.example/foo");
    const names = new Set([
      socketFileName(prefix, 1_000, 1),
      socketFileName(prefix, 1_000, 2),
      socketFileName(prefix, 1_001, 1),
    ]);
    expect(names.size).toBe(3);
  });

  it("refuse a directory too long for any socket, naming the path", () => {
    const dir = `/${"d".repeat(100)}`;
    expect(() => socketPath(dir, "dpo-x-1.sock")).toThrow(
      /socket path \/d+\/dpo-x-1\.sock is 114 bytes; unix sockets allow 107/,
    );
  });
});
