// freePort hands out ports outside the kernel's ephemeral range, where no outgoing connection can take
// one between the probe and its user's bind.
import { readFileSync } from "node:fs";
import { createServer, type AddressInfo } from "node:net";
import { describe, expect, it } from "vitest";
import { freePort, portsOutsideEphemeral } from "../../../../tools/cluster/tcp-relay.js";

describe("portsOutsideEphemeral", () => {
  it.each([
    { name: "Linux default", ephemeral: { low: 32768, high: 60999 }, want: { low: 20000, high: 32767 } },
    {
      name: "a range from 1024 up",
      ephemeral: { low: 1024, high: 50000 },
      want: { low: 50001, high: 65535 },
    },
    { name: "the whole port space", ephemeral: { low: 1024, high: 65535 }, want: undefined },
    { name: "unreadable", ephemeral: undefined, want: undefined },
    { name: "garbage", ephemeral: { low: Number.NaN, high: 5 }, want: undefined },
  ])("$name", ({ ephemeral, want }) => {
    expect(portsOutsideEphemeral(ephemeral)).toEqual(want);
  });
});

describe("freePort", () => {
  it("gives distinct ports that can be bound, outside the ephemeral range", async () => {
    const [low, high] = readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/);
    const ports = await Promise.all(Array.from({ length: 20 }, () => freePort()));
    expect(new Set(ports).size).toBe(ports.length);
    for (const port of ports) {
      expect(port >= Number(low) && port <= Number(high), `port ${port} in ${low}-${high}`).toBe(false);
      const server = createServer();
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(port, "127.0.0.1", resolve);
      });
      expect((server.address() as AddressInfo).port).toBe(port);
      await new Promise((resolve) => server.close(resolve));
    }
  });
});
