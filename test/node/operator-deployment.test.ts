// The operator as config/default installs it: its Deployment runs the dpo image on the real node (two
// replicas, leader election, the manifests' securityContext), the API server reaches its conversion webhook
// through the dpo-webhook Service, and the elected replica renders a config into plugin pods that register
// with the real kubelet. Only the image names and the real node's placement are changed from the
// kustomize output.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { CoordinationV1Api, CustomObjectsApi } from "@kubernetes/client-node";
import { parse, parseAllDocuments } from "yaml";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { DevicePluginConfigStatus } from "../../src/api/v1beta1/status.js";
import { LABEL_CONFIG } from "../../src/contract/names.js";
import { kubeConfigFromInjected, kubectl, waitFor } from "../cluster/helpers.js";
import { kubectlTable } from "../cluster/kubectl-table.js";
import { configStatusWhere } from "../e2e/upgrade-support.js";
import { installDpo, NAMESPACE, repo } from "../e2e/support.js";
import { core, dpoImage, ON_REAL_NODE, realNode, removeConfig, waitForAdvertised } from "./support.js";

const DEPLOYMENT = "dpo-operator";
const OPERATOR_SELECTOR = "app.kubernetes.io/name=dpo-operator";
const LEASE = "dpo-operator";
const CONFIG = "operator-deployment-mock";
const RESOURCE = "node-tier.example/deployed";
const ALPHA_CONFIG = "operator-deployment-alpha";

const custom = kubeConfigFromInjected().makeApiClient(CustomObjectsApi);
const coordination = kubeConfigFromInjected().makeApiClient(CoordinationV1Api);

interface Manifest {
  kind: string;
  metadata: { name: string };
  spec?: Record<string, unknown>;
}

interface OperatorContainer {
  name: string;
  image: string;
  env: { name: string; value?: string }[];
}

/** `kubectl kustomize config/default`, with the image `make image` built and the real node's placement. */
async function configDefault(): Promise<Manifest[]> {
  const { stdout } = await kubectl(["kustomize", join(repo, "config", "default")]);
  const docs = parseAllDocuments(stdout).map((d) => d.toJS() as Manifest);
  const deployment = docs.find((d) => d.kind === "Deployment" && d.metadata.name === DEPLOYMENT);
  if (deployment === undefined) throw new Error(`config/default has no Deployment ${DEPLOYMENT}`);
  const pod = (deployment.spec as { template: { spec: Record<string, unknown> } }).template.spec;
  const container = (pod.containers as OperatorContainer[]).find((c) => c.name === "manager")!;
  container.image = dpoImage();
  for (const env of container.env) if (env.name === "DPO_PLUGIN_IMAGE") env.value = dpoImage();
  pod.nodeSelector = {
    ...(pod.nodeSelector as Record<string, string> | undefined),
    ...ON_REAL_NODE.nodeSelector,
  };
  pod.tolerations = [...((pod.tolerations as unknown[] | undefined) ?? []), ...ON_REAL_NODE.tolerations];
  return docs;
}

async function operatorPods(): Promise<
  { name: string; node?: string; ready: boolean; uid?: number; phase?: string }[]
> {
  const pods = await core().listNamespacedPod({ namespace: NAMESPACE, labelSelector: OPERATOR_SELECTOR });
  return pods.items.map((p) => ({
    name: p.metadata!.name!,
    node: p.spec?.nodeName,
    phase: p.status?.phase,
    ready: p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false,
    uid: p.spec?.securityContext?.runAsUser,
  }));
}

function configStatus(
  name: string,
  description: string,
  check: (s: DevicePluginConfigStatus) => boolean,
): Promise<DevicePluginConfigStatus> {
  return configStatusWhere(custom, name, description, check);
}

beforeAll(async () => {
  await installDpo();
  const docs = await configDefault();
  await kubectl(["apply", "--server-side", "--force-conflicts", "--field-manager=node-tier", "-f", "-"], {
    input: docs.map((d) => JSON.stringify(d)).join("\n"),
  });
}, 300_000);

afterAll(async () => {
  await removeConfig(ALPHA_CONFIG);
  await removeConfig(CONFIG);
  // The tier's other files run the operator as a process: none of these replicas may be left to compete.
  await kubectl(["delete", "deployment", DEPLOYMENT, "-n", NAMESPACE, "--ignore-not-found", "--wait=true"], {
    allowFailure: true,
  });
  await waitFor(
    "the operator Deployment's pods to be gone",
    async (observe) => {
      const pods = await operatorPods();
      observe(pods);
      return pods.length === 0;
    },
    { timeoutMs: 120_000 },
  );
  await kubectl(["delete", "lease", LEASE, "-n", NAMESPACE, "--ignore-not-found"], { allowFailure: true });
}, 300_000);

describe("the operator from config/default on the real node", () => {
  it("runs both replicas as real containers with the manifests' securityContext, one of them the leader", async () => {
    const pods = await waitFor(
      `two Ready ${DEPLOYMENT} pods on ${realNode()}`,
      async (observe) => {
        const seen = await operatorPods();
        observe(seen);
        return seen.length === 2 && seen.every((p) => p.ready && p.node === realNode()) ? seen : undefined;
      },
      { timeoutMs: 180_000 },
    );
    expect(pods.map((p) => p.uid)).toEqual([65532, 65532]);
    // The process inside runs as that user, on a read-only root filesystem.
    const { stdout } = await kubectl([
      "exec",
      "-n",
      NAMESPACE,
      pods[0]!.name,
      "-c",
      "manager",
      "--",
      "node",
      "-e",
      "const fs=require('node:fs');let ro=false;try{fs.writeFileSync('/probe','x')}catch(e){ro=e.code==='EROFS'}console.log(JSON.stringify({uid:process.getuid(),ro}))",
    ]);
    expect(JSON.parse(stdout.trim())).toEqual({ uid: 65532, ro: true });

    const holder = await waitFor(
      `a holder of the Lease ${LEASE}`,
      async (observe) => {
        const lease = await coordination
          .readNamespacedLease({ name: LEASE, namespace: NAMESPACE })
          .catch(() => undefined);
        observe(lease?.spec?.holderIdentity);
        return lease?.spec?.holderIdentity || undefined;
      },
      { timeoutMs: 60_000 },
    );
    expect(pods.map((p) => p.name)).toContain(holder.split("_")[0]);
  });

  it("converts a v1alpha1 config through the dpo-webhook Service: the API server stores v1beta1 and serves both", async () => {
    const alpha = parse(
      readFileSync(join(repo, "test/fixtures/valid-v1alpha1/devfs-serial.yaml"), "utf8"),
    ) as Manifest & { spec: Record<string, unknown> };
    alpha.metadata.name = ALPHA_CONFIG;
    // Nowhere to run: only the conversion is under test here.
    alpha.spec.nodeSelector = { "node-tier.example/none": "true" };
    // The webhook's certificate may still be on its way into the CRD's caBundle: retry until it is there.
    await waitFor(
      "the API server to convert a v1alpha1 config through the webhook",
      async (observe) => {
        const result = await kubectl(["apply", "--server-side", "-f", "-"], {
          input: JSON.stringify(alpha),
          allowFailure: true,
        });
        observe(result.stderr.trim());
        return result.exitCode === 0;
      },
      { timeoutMs: 120_000 },
    );
    const beta = JSON.parse(
      (await kubectl(["get", `devicepluginconfigs.v1beta1.dpo.dev/${ALPHA_CONFIG}`, "-o", "json"])).stdout,
    ) as { apiVersion: string; spec: { backend: { type: string }; resourceName: string } };
    expect(beta.apiVersion).toBe("dpo.dev/v1beta1");
    expect(beta.spec.backend.type).toBe("DevFS");
    expect(beta.spec.resourceName).toBe("devices.example/serial");
    const back = JSON.parse(
      (await kubectl(["get", `devicepluginconfigs.v1alpha1.dpo.dev/${ALPHA_CONFIG}`, "-o", "json"])).stdout,
    ) as { apiVersion: string; spec: { backend: string; sharedDevNum: number } };
    expect(back.apiVersion).toBe("dpo.dev/v1alpha1");
    expect(back.spec.backend).toBe("DevFS");
    expect(back.spec.sharedDevNum).toBe(1);
  });

  it("reconciles a config into plugin pods on the real node, whose devices the real kubelet advertises", async () => {
    const config = {
      apiVersion: "dpo.dev/v1beta1",
      kind: "DevicePluginConfig",
      metadata: { name: CONFIG },
      spec: {
        resourceName: RESOURCE,
        backend: { type: "Mock", mock: { devices: 3, idPrefix: "deployed" } },
        ...ON_REAL_NODE,
      },
    };
    await kubectl(["apply", "--server-side", "-f", "-"], { input: JSON.stringify(config) });
    await waitForAdvertised(RESOURCE, { capacity: 3, allocatable: 3 }, 180_000);
    await configStatus(CONFIG, "Ready with 3 devices on 1 node", (s) =>
      Boolean(
        s.conditions?.some((c) => c.type === "Ready" && c.status === "True") &&
        s.devices?.allocatable === 3 &&
        s.nodes?.ready === 1,
      ),
    );
    const table = kubectlTable((await kubectl(["get", "dpc", CONFIG])).stdout);
    expect(table[0]).toMatchObject({ NAME: CONFIG, READY: "True" });
    // The plugin pod the elected replica rendered runs the same image, on the real node.
    const plugins = await core().listNamespacedPod({
      namespace: NAMESPACE,
      fieldSelector: `spec.nodeName=${realNode()}`,
      labelSelector: `${LABEL_CONFIG}=${CONFIG}`,
    });
    expect(plugins.items.map((p) => p.spec?.containers[0]?.image)).toEqual([dpoImage()]);
  });
});
