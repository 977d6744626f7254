// The KWOK stages that stand in for kubelets: nodes become Ready and send heartbeats, pods run and go away.
import { stringify } from "yaml";

/**
 * How often a simulated node refreshes its conditions. The node lease (renewed by KWOK) is what keeps
 * the node Ready for the node lifecycle controller; this refresh exists so that a status write by
 * KWOK happens regularly, which lets tests prove such writes keep capacity patched by others.
 */
export const NODE_HEARTBEAT_INTERVAL_MS = 10_000;

interface Stage {
  apiVersion: "kwok.x-k8s.io/v1alpha1";
  kind: "Stage";
  metadata: { name: string };
  spec: Record<string, unknown>;
}

const readyConditionStatus = '.status.conditions.[] | select( .type == "Ready" ) | .status';

// Only conditions are written, so capacity, allocatable, addresses and nodeInfo stay as created.
const nodeConditionsTemplate = `
{{ $now := Now }}
{{ $since := or .metadata.creationTimestamp $now }}
conditions:
{{ range NodeConditions }}
- type: {{ .type | Quote }}
  status: {{ .status | Quote }}
  reason: {{ .reason | Quote }}
  message: {{ .message | Quote }}
  lastHeartbeatTime: {{ $now | Quote }}
  lastTransitionTime: {{ $since | Quote }}
{{ end }}
`;

const podRunningTemplate = `
{{ $now := Now }}
conditions:
- type: Initialized
  status: "True"
  lastTransitionTime: {{ $now | Quote }}
- type: PodReadyToStartContainers
  status: "True"
  lastTransitionTime: {{ $now | Quote }}
- type: ContainersReady
  status: "True"
  lastTransitionTime: {{ $now | Quote }}
- type: Ready
  status: "True"
  lastTransitionTime: {{ $now | Quote }}
{{ range .spec.readinessGates }}
- type: {{ .conditionType | Quote }}
  status: "True"
  lastTransitionTime: {{ $now | Quote }}
{{ end }}
initContainerStatuses:
{{ range .spec.initContainers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: true
  restartCount: 0
{{ if eq .restartPolicy "Always" }}
  started: true
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ else }}
  state:
    terminated:
      exitCode: 0
      reason: Completed
      startedAt: {{ $now | Quote }}
      finishedAt: {{ $now | Quote }}
{{ end }}
{{ end }}
containerStatuses:
{{ range .spec.containers }}
- name: {{ .name | Quote }}
  image: {{ .image | Quote }}
  ready: true
  started: true
  restartCount: 0
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
{{ with NodeIPsWith .spec.nodeName }}
hostIP: {{ index . 0 | Quote }}
hostIPs:
{{ range . }}
- ip: {{ . | Quote }}
{{ end }}
{{ end }}
{{ with PodIPsWith .spec.nodeName ( or .spec.hostNetwork false ) ( or .metadata.uid "" ) ( or .metadata.name "" ) ( or .metadata.namespace "" ) }}
podIP: {{ index . 0 | Quote }}
podIPs:
{{ range . }}
- ip: {{ . | Quote }}
{{ end }}
{{ end }}
phase: Running
startTime: {{ $now | Quote }}
`;

/**
 * With the kubelet simulator (tools/kubelet-sim), KWOK leaves it the pods a kubelet would have to do
 * real work for: plugin pods, which run a real `dpo plugin` process and are Running only once it
 * started, pods asking for an extended resource, which the device manager must admit through
 * Allocate (or reject with UnexpectedAdmissionError), and pods with DRA ResourceClaims, which start
 * only once their claims were prepared through NodePrepareResources. Keep in step with simulatorRunsPod() in
 * tools/kubelet-sim/pod-admission.ts. The keys are gojq expressions evaluated on the pod.
 */
export const KUBELET_SIMULATOR_POD_SELECTOR = [
  { key: '.metadata.labels["app.kubernetes.io/name"]', operator: "NotIn", values: ["dpo-plugin"] },
  {
    key:
      "[(.spec.initContainers // [])[], (.spec.containers // [])[] | " +
      '((.resources.limits // {}) + (.resources.requests // {})) | keys[] | select(contains("/"))] | length',
    operator: "In",
    values: ["0"],
  },
  { key: "(.spec.resourceClaims // []) | length", operator: "In", values: ["0"] },
];

export interface KubeletStagesOptions {
  /** Leave plugin pods and pods asking for extended resources to the kubelet simulator. */
  kubeletSimulator?: boolean;
  /** How often a node refreshes its conditions (NODE_HEARTBEAT_INTERVAL_MS by default). */
  heartbeatIntervalMs?: number;
}

export function simulatedKubeletStages(options: KubeletStagesOptions = {}): Stage[] {
  const heartbeatMs = options.heartbeatIntervalMs ?? NODE_HEARTBEAT_INTERVAL_MS;
  const stage = (name: string, spec: Record<string, unknown>): Stage => ({
    apiVersion: "kwok.x-k8s.io/v1alpha1",
    kind: "Stage",
    metadata: { name },
    spec,
  });
  return [
    stage("dpo-node-ready", {
      resourceRef: { apiGroup: "v1", kind: "Node" },
      selector: { matchExpressions: [{ key: readyConditionStatus, operator: "NotIn", values: ["True"] }] },
      next: { statusTemplate: nodeConditionsTemplate },
    }),
    stage("dpo-node-heartbeat", {
      resourceRef: { apiGroup: "v1", kind: "Node" },
      selector: { matchExpressions: [{ key: readyConditionStatus, operator: "In", values: ["True"] }] },
      delay: {
        durationMilliseconds: heartbeatMs,
        jitterDurationMilliseconds: Math.round(heartbeatMs * 1.2),
      },
      next: { statusTemplate: nodeConditionsTemplate },
      immediateNextStage: true,
    }),
    stage("dpo-pod-running", {
      resourceRef: { apiGroup: "v1", kind: "Pod" },
      selector: {
        matchExpressions: [
          { key: ".metadata.deletionTimestamp", operator: "DoesNotExist" },
          { key: ".status.phase", operator: "In", values: ["Pending"] },
          { key: readyConditionStatus, operator: "NotIn", values: ["True"] },
          ...(options.kubeletSimulator ? KUBELET_SIMULATOR_POD_SELECTOR : []),
        ],
      },
      next: { statusTemplate: podRunningTemplate },
    }),
    // Without a kubelet nothing would finish a graceful deletion, so terminating pods go at once.
    stage("dpo-pod-delete", {
      resourceRef: { apiGroup: "v1", kind: "Pod" },
      selector: { matchExpressions: [{ key: ".metadata.deletionTimestamp", operator: "Exists" }] },
      next: { delete: true },
    }),
  ];
}

/**
 * KWOK's own options (KwokConfiguration): how many node leases, node stages and pod stages it works on
 * at once. Its default of 4 each keeps up with about a thousand nodes here; at 5000 the leases and
 * heartbeats fall behind and nodes turn NotReady.
 */
export interface KwokOptions {
  parallelism?: number;
}

/** KWOK's --config format: YAML documents, one per object. */
export function renderKwokConfig(stages: Stage[], options: KwokOptions = {}): string {
  const docs: object[] = [...stages];
  if (options.parallelism !== undefined) {
    docs.unshift({
      apiVersion: "config.kwok.x-k8s.io/v1alpha1",
      kind: "KwokConfiguration",
      options: {
        nodeLeaseParallelism: options.parallelism,
        nodePlayStageParallelism: options.parallelism,
        podPlayStageParallelism: options.parallelism,
      },
    });
  }
  return docs.map((doc) => stringify(doc, { lineWidth: 0 })).join("---\n");
}
