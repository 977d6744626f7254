// The plugin's stop puts the end of the kubelet's ListAndWatch stream on the wire before its socket file
// goes: a standby instance of the plugin registers as soon as the file goes, and a kubelet before v1.37
// that handled the old stream's end after that registration would cut the new one off (kubernetes
// #121994). The kubelet here is a bare HTTP/2 client, whose 'trailers' event fires as the bytes are read,
// so the order the test sees is the order on the socket (a gRPC client would hand the end on later).
import { existsSync, watch } from "node:fs";
import * as http2 from "node:http2";
import { connect } from "node:net";
import { basename, join } from "node:path";
import { pino } from "pino";
import { afterEach, expect, it } from "vitest";
import { PluginRuntime } from "../../src/plugin-runtime/runtime.js";
import { makeConfig, tempDir, waitFor } from "./support.js";

let cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  cleanups = [];
});

/** A ListAndWatch call as the kubelet makes it: one empty request message, then the answers. */
function listAndWatch(socketPath: string): { firstMessage: Promise<void>; ended: () => boolean } {
  const session = http2.connect("http://localhost", { createConnection: () => connect(socketPath) });
  cleanups.push(() => void session.destroy());
  session.on("error", () => undefined);
  const stream = session.request({
    ":method": "POST",
    ":path": "/v1beta1.DevicePlugin/ListAndWatch",
    "content-type": "application/grpc",
    te: "trailers",
  });
  stream.on("error", () => undefined);
  let ended = false;
  stream.on("trailers", () => (ended = true));
  stream.end(Buffer.alloc(5));
  const firstMessage = new Promise<void>((resolve) => stream.once("data", () => resolve()));
  return { firstMessage, ended: () => ended };
}

it("ends the kubelet's ListAndWatch before the socket file goes", async () => {
  const tmp = tempDir("order");
  cleanups.push(() => tmp.cleanup());
  const dir = join(tmp.dir, "dp");
  const runtime = new PluginRuntime({
    config: makeConfig({}),
    devicePluginDir: dir,
    pluginsRegistryDir: join(tmp.dir, "reg"),
    registration: "kubelet",
    nodeName: "node-a",
    logger: pino({ level: process.env["DPO_TEST_LOG"] ?? "silent" }),
    cdiDir: join(tmp.dir, "cdi"),
  });
  await runtime.start();
  cleanups.push(() => runtime.stop());
  const socket = runtime.status().socketPath!;
  const call = listAndWatch(socket);
  await call.firstMessage;

  let endedWhenGone: boolean | undefined;
  const watcher = watch(dir, (_event, name) => {
    if (name === basename(socket) && endedWhenGone === undefined && !existsSync(socket)) {
      endedWhenGone = call.ended();
    }
  });
  cleanups.push(() => watcher.close());
  await runtime.stop();
  await waitFor("the socket file gone and seen going", (observe) => {
    observe({ exists: existsSync(socket), endedWhenGone, ended: call.ended() });
    return endedWhenGone !== undefined;
  });
  expect(endedWhenGone, "the stream's end had arrived when the socket file went").toBe(true);
});
