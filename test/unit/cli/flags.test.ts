// --metrics-addr, --health-addr and --webhook-addr: what each form listens on.
import { describe, expect, it } from "vitest";
import { parseListenAddress, UsageError } from "../../../src/cli/flags.js";

describe("parseListenAddress", () => {
  it.each([
    // `:PORT` and `PORT` are every address of both families, as in Go's net.Listen: no host to look up.
    { value: ":8080", want: { host: undefined, port: 8080 } },
    { value: "8080", want: { host: undefined, port: 8080 } },
    { value: ":0", want: { host: undefined, port: 0 } },
    { value: "0.0.0.0:8080", want: { host: "0.0.0.0", port: 8080 } },
    { value: "127.0.0.1:0", want: { host: "127.0.0.1", port: 0 } },
    { value: "[::1]:9090", want: { host: "::1", port: 9090 } },
    { value: "[::]:9090", want: { host: "::", port: 9090 } },
    { value: "localhost:65535", want: { host: "localhost", port: 65535 } },
    { value: "0", want: undefined },
    { value: "", want: undefined },
  ])("$value", ({ value, want }) => {
    expect(parseListenAddress("metrics-addr", value)).toEqual(want);
  });

  it.each([":http", "host:", ":65536", "1.2.3.4:-1", ":8080x"])("refuses %s naming the flag", (value) => {
    expect(() => parseListenAddress("health-addr", value)).toThrow(UsageError);
    expect(() => parseListenAddress("health-addr", value)).toThrow(/--health-addr: '.*' is not HOST:PORT/);
  });
});
