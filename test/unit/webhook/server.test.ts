// The conversion webhook's HTTPS listener as the API server's client meets it.
import { request } from "node:https";
import { pino } from "pino";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { planCertificates } from "../../../src/webhook/certificates.js";
import { ConversionWebhookServer, CONVERT_PATH, KEEP_ALIVE_TIMEOUT_MS } from "../../../src/webhook/server.js";

describe("ConversionWebhookServer", () => {
  const hour = 3_600_000;
  const plan = planCertificates(
    {},
    undefined,
    { hosts: ["127.0.0.1"], caValidityMs: 2 * hour, certValidityMs: hour, settleMs: 0 },
    Date.now(),
  );
  const server = new ConversionWebhookServer({
    host: "127.0.0.1",
    port: 0,
    logger: pino({ level: "silent" }),
  });
  let port = 0;
  beforeAll(async () => {
    port = await server.start({ certPem: plan.files!["tls.crt"]!, keyPem: plan.files!["tls.key"]! });
  });
  afterAll(() => server.close());

  // Found by config fuzzing: with Node's default 5 s the webhook closed idle connections the API server
  // (client-go, idle timeout 90 s) was about to reuse, and conversions failed with "connection reset by peer".
  it("keeps idle connections open longer than the API server's client keeps them for reuse", async () => {
    expect(KEEP_ALIVE_TIMEOUT_MS).toBeGreaterThan(90_000);
    const headers = await new Promise<Record<string, unknown>>((resolve, reject) => {
      const req = request(
        {
          host: "127.0.0.1",
          port,
          path: CONVERT_PATH,
          method: "POST",
          ca: plan.caBundle,
          agent: false,
          headers: { Connection: "keep-alive" },
        },
        (res) => {
          res.resume();
          res.on("end", () => resolve(res.headers));
        },
      );
      req.on("error", reject);
      req.end("{}");
    });
    expect(headers["keep-alive"]).toBe(`timeout=${KEEP_ALIVE_TIMEOUT_MS / 1000}`);
  });
});
