// The conversion webhook served from the test process (the same server and conversion code the operator
// runs, with a CA made for the run), for tests that need the API server to convert without an operator.
import { pino } from "pino";
import { planCertificates } from "../../src/webhook/certificates.js";
import { ConversionWebhookServer } from "../../src/webhook/server.js";
import { CONVERSION_SERVICE, DEVICE_PLUGIN_CONFIG_CRD_NAME } from "../../src/api/crd.js";
import { replaceClientConfig } from "../../tools/cluster/install-dpo.js";
import { kubectl } from "./helpers.js";

/** Where config/crd points the webhook in a cluster; tests put it back when done. */
const SERVICE_CLIENT_CONFIG = { service: { ...CONVERSION_SERVICE } };

export interface TestConversionWebhook {
  port: number;
  stop(): Promise<void>;
}

/** Serves conversion on 127.0.0.1 and points the DevicePluginConfig CRD at it, trusting its CA. */
export async function serveConversionFromTest(): Promise<TestConversionWebhook> {
  const hour = 3600_000;
  const plan = planCertificates(
    {},
    undefined,
    { hosts: ["127.0.0.1"], caValidityMs: 2 * hour, certValidityMs: hour, settleMs: 0 },
    Date.now(),
  );
  const files = plan.files!;
  const server = new ConversionWebhookServer({
    host: "127.0.0.1",
    port: 0,
    logger: pino({ level: "silent" }),
  });
  const port = await server.start({ certPem: files["tls.crt"]!, keyPem: files["tls.key"]! });
  await setClientConfig({
    url: `https://127.0.0.1:${port}/convert`,
    caBundle: Buffer.from(plan.caBundle).toString("base64"),
  });
  return {
    port,
    async stop() {
      await setClientConfig(SERVICE_CLIENT_CONFIG);
      await server.close();
    },
  };
}

/** Replaces the whole clientConfig (a JSON patch), so no url or service of an earlier run lingers. */
export async function setClientConfig(clientConfig: object): Promise<void> {
  await replaceClientConfig(
    async (args) => (await kubectl(args)).stdout,
    DEVICE_PLUGIN_CONFIG_CRD_NAME,
    clientConfig,
  );
}

export { SERVICE_CLIENT_CONFIG };
